// What both footprint programs share: reading their own resident memory. Imports only the C
// library, so it adds nothing to what the programs themselves load.
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `VmRSS` line of /proc/self/status, in kB (0 where there is no /proc).
public func residentKilobytes() -> Int {
    guard let file = fopen("/proc/self/status", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix("VmRSS:") {
            return Int(text.dropFirst(6).filter { $0.isNumber }) ?? 0
        }
    }
    return 0
}
