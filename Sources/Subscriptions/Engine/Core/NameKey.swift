/// The hash under which the name table files a name: equal for names that are equal `String`s.
///
/// Swift compares strings by canonical equivalence: `"caf\u{E9}"` (é as one scalar) and
/// `"cafe\u{301}"` (e and a combining accent) are equal, so they are one name. A byte hash sees
/// different bytes, so the fast one (`_asciiHash`) is used only where bytes and equality agree:
///
/// - **ASCII names** (nearly all of them) have exactly one canonical form. They get the fast hash
///   of their bytes, with the ASCII check folded into the same pass.
/// - **Names equal to an ASCII string**: three non-ASCII scalars are canonically equivalent to
///   an ASCII character (U+037E GREEK QUESTION MARK to `;`, U+1FEF GREEK VARIA to `` ` ``, U+212A
///   KELVIN SIGN to `K`), so a name made of ASCII and these is mapped to its ASCII form and
///   hashed like it. A test checks this list against every Unicode scalar.
/// - **Every other name** gets the standard library's hash of the `String` (`Hasher`), which
///   hashes the canonical form, so equivalent spellings meet.
///
/// Names come from the program, not from an adversary, so the unseeded byte hash is fine for
/// ASCII. Non-ASCII names pay for a pass over their scalars and `Hasher` on every post by name;
/// a `Topic` hashes its name once.
///
/// A native or small string (every string on Linux, nearly every one elsewhere) lends its UTF-8
/// bytes in place: `withUTF8` would need a mutable copy, a retain and a release of the storage
/// on every post by name.
@inline(__always)
func _canonicalNameHash(_ name: String) -> UInt {
    guard let (hash, ascii) = name.utf8.withContiguousStorageIfAvailable({ _asciiHash($0) }) else {
        return _contiguousNameHash(name)
    }
    if _fastPath(ascii) { return hash }
    return _nonASCIINameHash(name)
}

/// The hash of a string whose UTF-8 bytes are not stored contiguously (one bridged lazily from
/// an `NSString` on Apple platforms): that of its contiguous copy.
@inline(never)
func _contiguousNameHash(_ name: String) -> UInt {
    var copy = name
    copy.makeContiguousUTF8()
    return _canonicalNameHash(copy)
}

/// The fast byte hash of `bytes`, and whether every byte is ASCII.
///
/// Eight bytes at a time, each word mixed by a multiply-xorshift, then a finish. The last word
/// is the last eight bytes, overlapping the one before (the length is mixed in first, so this
/// stays unambiguous); names of 1 to 7 bytes are read with two overlapping 4-byte loads, or three
/// single bytes. No copy of a partial word, and every byte is read by a load whose value is also
/// or-ed into the ASCII check.
@inline(__always)
func _asciiHash(_ bytes: UnsafeBufferPointer<UInt8>) -> (hash: UInt, isASCII: Bool) {
    let count = bytes.count
    var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(truncatingIfNeeded: count)
    var high: UInt64 = 0
    if count > 0, let base = bytes.baseAddress {
        let raw = UnsafeRawPointer(base)
        let tail: UInt64
        if count >= 8 {
            var i = 0
            while i &+ 8 < count {
                let word = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                high |= word
                h = (h ^ word) &* 0xFF51_AFD7_ED55_8CCD
                h ^= h &>> 29
                i &+= 8
            }
            tail = raw.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self)
        } else if count >= 4 {
            let first = UInt64(raw.loadUnaligned(as: UInt32.self))
            let last = UInt64(raw.loadUnaligned(fromByteOffset: count &- 4, as: UInt32.self))
            tail = first | last &<< 32
        } else {
            tail = UInt64(base[0]) | UInt64(base[count &>> 1]) &<< 8 | UInt64(base[count &- 1]) &<< 16
        }
        high |= tail
        h = (h ^ tail) &* 0xC4CE_B9FE_1A85_EC53
    }
    var x = h ^ (h &>> 32)
    x &*= 0xD6E8_FEB8_6659_FD93
    x ^= x &>> 32
    return (UInt(truncatingIfNeeded: x), high & 0x8080_8080_8080_8080 == 0)
}

/// The non-ASCII scalars that are canonically equivalent to an ASCII character, with it.
let _asciiEquivalents: [(scalar: Unicode.Scalar, ascii: Unicode.Scalar)] = [
    ("\u{037E}", ";"), ("\u{1FEF}", "`"), ("\u{212A}", "K"),
]

/// The hash of a name that is not ASCII: that of its ASCII form when it has one, else the
/// standard library's canonical `String` hash.
@inline(never)
func _nonASCIINameHash(_ name: String) -> UInt {
    var ascii = String.UnicodeScalarView()
    for scalar in name.unicodeScalars {
        if scalar.isASCII {
            ascii.append(scalar)
        } else if let pair = _asciiEquivalents.first(where: { $0.scalar == scalar }) {
            ascii.append(pair.ascii)
        } else {
            return UInt(bitPattern: name.hashValue)
        }
    }
    var form = String(ascii)
    return form.withUTF8 { _asciiHash($0).hash }
}
