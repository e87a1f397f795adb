// The commands a publisher sends, formatted into a `_Connection`'s output buffer: `PUBLISH`,
// `SPUBLISH`, `XADD`, and the `SET` or `DEL` of a retained post, written as RESP without
// per-command allocation; and the marks that keep a command's bytes to send it again.
// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    extension _Connection {
        /// Appends one `PUBLISH` for each message of `batch` to the output buffer: `counts` gives the
        /// messages in order, as the number of consecutive posts of `batch` each carries (one: the
        /// post's own message; more: a batch message of that many posts of one channel, see `_Wire`).
        /// `sequence(channel, posts)` numbers each message (the first post's number), and `signer`,
        /// when given, signs it. The commands are formatted (RESP) straight into the output buffer,
        /// no per-command formatting or allocation. `sharded`: `SPUBLISH` (a cluster) instead. With
        /// `historyLength > 0` each is an `XADD channel MAXLEN ~ historyLength * m message` instead
        /// (history mode; with `sharded`, sent to the key's primary as well).
        ///
        /// With `retainedKeys`, a retained post (kind `T` or `P`, always alone) is first stored: `SET
        /// <prefix>retained:<name>` (in a cluster: the key in the channel's slot, see
        /// `_RetainedOnServer.clusterKey`) with the same message signed for the key; a clear (kind
        /// `c`) is preceded by the `DEL` of that key. A name of a cluster without such a key gets
        /// neither: its message alone (the caller reports it). `command` is told the post count of every command appended, in order (zero for `SET`,
        /// `DEL` and a clear's own message); `sent` is told, right after the last command of each
        /// message (its `SET` or `DEL` included), which posts of `batch` it carried and the number it
        /// was given, so that the same commands can be appended again (see `_Resend`).
        func appendPublishes(
            _ batch: [_Outgoing], counts: [Int], signer: _Signer?, sharded: Bool = false, historyLength: Int = 0,
            retainedKeys: _RetainedKeys? = nil, command: (_ posts: Int) -> Void = { _ in },
            sent: (_ posts: Range<Int>, _ first: UInt64) -> Void = { _, _ in },
            sequence: (_ channel: [UInt8], _ posts: Int) -> UInt64
        ) {
            let cap = Array("\(historyLength)".utf8)
            let signature = signer == nil ? 0 : _Wire.signatureLength
            var start = batch.startIndex
            for count in counts {
                let channel = batch[start].channel
                let kind = batch[start].message[_Wire.headerLength - 1]
                if count == 1, let keys = retainedKeys, _Wire.travelsAlone(kind) {
                    let key = keys.key(channel)
                    if kind == _Wire.clearRetained {
                        if let key {
                            output.append(contentsOf: Self.delPrefix)
                            _appendLength(key.count, to: &output)
                            output.append(contentsOf: key)
                            output.append(contentsOf: [13, 10])
                            command(0)
                        }
                        let first = sequence(channel, 1)
                        appendMessage(
                            batch, start: start, count: 1, first: first, signer: signer,
                            sharded: sharded, historyLength: historyLength, cap: cap)
                        command(0)
                        sent(start..<(start + 1), first)
                        start += 1
                        continue
                    }
                    let first = sequence(channel, 1)
                    if let key {
                        output.append(contentsOf: Self.setPrefix)
                        _appendLength(key.count, to: &output)
                        output.append(contentsOf: key)
                        output.append(contentsOf: [13, 10])
                        _appendLength(batch[start].message.count + signature, to: &output)
                        let frame = output.count
                        output.append(contentsOf: batch[start].message)
                        _Wire.setSequence(first, in: &output, at: frame)
                        if let signer { signer.sign(channel: key, frameAt: frame, in: &output) }
                        output.append(contentsOf: [13, 10])
                        command(0)
                    }
                    appendMessage(
                        batch, start: start, count: 1, first: first, signer: signer, sharded: sharded,
                        historyLength: historyLength, cap: cap)
                    command(1)
                    sent(start..<(start + 1), first)
                    start += 1
                    continue
                }
                let first = sequence(channel, count)
                appendMessage(
                    batch, start: start, count: count, first: first, signer: signer,
                    sharded: sharded, historyLength: historyLength, cap: cap)
                command(count)
                sent(start..<(start + count), first)
                start += count
            }
        }

        /// Appends the `PUBLISH` (or `SPUBLISH`, or `XADD`) of the message of the `count` posts of
        /// `batch` from `start`, numbered `first`; see `appendPublishes`.
        private func appendMessage(
            _ batch: [_Outgoing], start: Int, count: Int, first: UInt64, signer: _Signer?, sharded: Bool,
            historyLength: Int, cap: [UInt8]
        ) {
            let signature = signer == nil ? 0 : _Wire.signatureLength
            let channel = batch[start].channel
            output.append(
                contentsOf: historyLength > 0
                    ? Self.xaddPrefix : sharded ? Self.shardedPublishPrefix : Self.publishPrefix)
            _appendLength(channel.count, to: &output)
            output.append(contentsOf: channel)
            output.append(contentsOf: [13, 10])
            if historyLength > 0 {
                output.append(contentsOf: Self.xaddMaxLength)
                _appendLength(cap.count, to: &output)
                output.append(contentsOf: cap)
                output.append(contentsOf: Self.xaddField)
            }
            let posts = batch[start..<(start + count)]
            let length = count == 1 ? batch[start].message.count : _Wire.batchLength(posts)
            _appendLength(length + signature, to: &output)
            let frame = output.count
            if count == 1 {
                output.append(contentsOf: batch[start].message)
            } else {
                _Wire.appendBatch(posts, to: &output)
            }
            _Wire.setSequence(first, in: &output, at: frame)
            if let signer { signer.sign(channel: channel, frameAt: frame, in: &output) }
            output.append(contentsOf: [13, 10])
        }

        private static let setPrefix = Array("*3\r\n$3\r\nSET\r\n".utf8)
        private static let delPrefix = Array("*2\r\n$3\r\nDEL\r\n".utf8)

        private static let publishPrefix = Array("*3\r\n$7\r\nPUBLISH\r\n".utf8)
        private static let shardedPublishPrefix = Array("*3\r\n$8\r\nSPUBLISH\r\n".utf8)
        /// `XADD key MAXLEN ~ n * m message`, around the key and `n`.
        private static let xaddPrefix = Array("*8\r\n$4\r\nXADD\r\n".utf8)
        private static let xaddMaxLength = Array("$6\r\nMAXLEN\r\n$1\r\n~\r\n".utf8)
        private static let xaddField = Array("\r\n$1\r\n*\r\n$1\r\nm\r\n".utf8)

        /// Appends `PUBLISH channel message` to the output buffer (the message as it is).
        func appendPublish(_ channel: [UInt8], _ message: [UInt8]) {
            append([Array("PUBLISH".utf8), channel, message])
        }

        /// How many bytes wait in the output buffer: a mark for `pendingOutput(from:)`.
        var pendingOutputCount: Int { output.count }

        /// The bytes appended since `mark` and not sent yet: a command's, kept to be sent again
        /// elsewhere (a cluster's redirected command). Valid until the next append or flush.
        func pendingOutput(from mark: Int) -> ArraySlice<UInt8> { output[mark...] }

        /// Appends bytes that are already formatted commands (see `pendingOutput(from:)`).
        func appendFormatted(_ bytes: [UInt8]) { output.append(contentsOf: bytes) }
    }

    /// Appends `$<count>\r\n` (a RESP bulk string's length line).
    private func _appendLength(_ count: Int, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "$"))
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var value = count
        var used = 0
        withUnsafeMutableBytes(of: &digits) { digits in
            repeat {
                digits[19 - used] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
                used += 1
            } while value > 0
            bytes.append(contentsOf: digits[(20 - used)...])
        }
        bytes.append(13)
        bytes.append(10)
    }
#endif
