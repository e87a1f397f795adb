import Foundation
import Subscriptions

#if canImport(Glibc)
    import Glibc

    /// glibc's `mallinfo2()` (glibc 2.33+), looked up at run time: the Swift `Glibc` module does not
    /// include `<malloc.h>`, so the function is not declared for Swift.
    ///
    /// Its `struct mallinfo2` is ten `size_t` fields, returned through a hidden result pointer (it is
    /// larger than two registers on every 64-bit Linux ABI). We declare the return type as
    /// `struct rusage`, a C struct the module does import that is also returned that way and is
    /// larger, so the compiler passes a result buffer big enough for the ten fields; we read them
    /// from its first 80 bytes.
    private func mallinfo2InUse() -> (uordblks: UInt, hblkhd: UInt)? {
        typealias Function = @convention(c) () -> rusage
        let fields = 10
        guard MemoryLayout<rusage>.size >= fields * MemoryLayout<UInt>.size,
            let process = dlopen(nil, RTLD_NOW), let symbol = dlsym(process, "mallinfo2")
        else { return nil }
        var result = unsafeBitCast(symbol, to: Function.self)()
        // Field order: arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost.
        return withUnsafeBytes(of: &result) { raw in
            let word = MemoryLayout<UInt>.size
            return (
                raw.load(fromByteOffset: 7 * word, as: UInt.self), raw.load(fromByteOffset: 4 * word, as: UInt.self)
            )
        }
    }
#endif

/// Bytes the allocator has handed out and not taken back: glibc's `mallinfo2()` in-use bytes of
/// the heap arenas (`uordblks`) plus the large blocks it mapped separately (`hblkhd`). `nil` where
/// glibc (2.33 or later) is not the C library.
func heapInUse() -> Int? {
    #if canImport(Glibc)
        guard let info = mallinfo2InUse() else { return nil }
        return Int(info.uordblks) + Int(info.hblkhd)
    #else
        return nil
    #endif
}

/// Heap bytes per subscription over 100,000 subscriptions of one name, for PostCenter and
/// NotificationCenter, with the same handler closure in both.
func memorySection(_ config: RunConfig, quick: Bool) -> Section {
    let count = 100_000
    let target = 150.0
    var section = Section(
        id: "memory", title: "Heap bytes per subscription (\(grouped(count)) subscriptions of one name)",
        notes: [
            "glibc mallinfo2() (uordblks + hblkhd) before and after making the subscriptions; median of \(quick ? 1 : 3) runs.",
            "The handler is the same closure in both, capturing one pointer: `{ _ in counter.pointee &+= 1 }`.",
            "'with closure' INCLUDES the closure context each subscription allocates; 'closure' is that context alone",
            "(measured by making \(grouped(count)) such closures); 'without closure' is the difference.",
            "The array holding the tokens/observers is reserved beforehand and not counted.",
        ],
        columns: ["contender", "with closure", "closure", "without closure", "NC/ours", "target", "result"])
    guard heapInUse() != nil else {
        section.notes.append("n/a: heap statistics need glibc's mallinfo2(); this platform has none.")
        for label in ["PostCenter plain subscribe", "PostCenter typed subscribe", "NotificationCenter addObserver"] {
            section.add(
                [
                    label, "n/a", "n/a", "n/a", "n/a",
                    label.hasPrefix("PostCenter") ? "≤\(Int(target)) B (with closure)" : "", "n/a",
                ],
                Row(contender: label, size: count, figures: [:], target: nil, pass: nil))
        }
        return section
    }
    let runs = quick ? 1 : 3
    let counter = Counter.make()
    let name = "bench.memory"
    let topic = Topic<Int>(name)
    let notificationName = Notification.Name(name)

    // Warm-up: type metadata, the Foundation center's first-use state, the route table.
    do {
        let center = PostCenter()
        var tokens: [Subscription] = []
        subscribeMany(center, name, counter, 1, into: &tokens)
        subscribeManyTyped(center, topic, counter, 1, into: &tokens)
        center.post(name, PostObject())
        tokens.removeAll()
        let foundation = NotificationCenter()
        var observers: [NSObjectProtocol] = []
        observeMany(foundation, notificationName, counter, 1, into: &observers)
        foundation.post(name: notificationName, object: nil)
        foundation.removeObserver(observers[0])
        var boxes: [HandlerBox] = []
        makeHandlerContexts(counter, 1, into: &boxes)
    }

    func perItem(_ make: () -> Void) -> Double {
        let before = heapInUse()!
        make()
        let after = heapInUse()!
        return Double(after - before) / Double(count)
    }
    func median(_ values: [Double]) -> Double { Stats(values).median }

    let closureBytes = median(
        (0..<runs).map { _ in
            var boxes: [HandlerBox] = []
            boxes.reserveCapacity(count)
            let bytes = perItem { makeHandlerContexts(counter, count, into: &boxes) }
            counter.reset()
            for box in boxes { box.handler(PostObject()) }
            expectCalls(counter.value, count, "calls of \(count) handler closures")
            return bytes
        })

    func postCenterBytes(typed: Bool) -> Double {
        median(
            (0..<runs).map { _ in
                let center = PostCenter()
                var tokens: [Subscription] = []
                tokens.reserveCapacity(count)
                let bytes = perItem {
                    if typed {
                        subscribeManyTyped(center, topic, counter, count, into: &tokens)
                    } else {
                        subscribeMany(center, name, counter, count, into: &tokens)
                    }
                }
                counter.reset()
                let delivered = typed ? center.post(topic, 1) : center.post(name, PostObject())
                expectCalls(delivered, count, "post to \(count) subscriptions (returned count)")
                expectCalls(counter.value, count, "post to \(count) subscriptions")
                return bytes
            })
    }
    let plain = postCenterBytes(typed: false)
    let typed = postCenterBytes(typed: true)
    let foundation = median(
        (0..<runs).map { _ in
            let center = NotificationCenter()
            var observers: [NSObjectProtocol] = []
            observers.reserveCapacity(count)
            let bytes = perItem { observeMany(center, notificationName, counter, count, into: &observers) }
            counter.reset()
            center.post(name: notificationName, object: nil)
            expectCalls(counter.value, count, "NotificationCenter post to \(count) observers")
            return bytes
        })

    let plainCheck = section.check(
        "heap bytes per plain subscription (including its closure context)", target: "≤ \(Int(target)) bytes",
        measured: plain, text: fmt(plain, 1) + " bytes", pass: plain <= target)
    let typedCheck = section.check(
        "heap bytes per typed subscription (including its closure context)", target: "≤ \(Int(target)) bytes",
        measured: typed, text: fmt(typed, 1) + " bytes", pass: typed <= target)
    let lines: [(String, Double, Check?)] = [
        ("PostCenter plain subscribe", plain, plainCheck), ("PostCenter typed subscribe", typed, typedCheck),
        ("NotificationCenter addObserver", foundation, nil),
    ]
    for (label, bytes, check) in lines {
        section.add(
            [
                label, fmt(bytes, 1) + " B", fmt(closureBytes, 1) + " B", fmt(bytes - closureBytes, 1) + " B",
                times(foundation / bytes), check != nil ? "≤\(Int(target)) B (with closure)" : "(reference)",
                check.map { $0.pass ? "PASS" : "FAIL" } ?? "",
            ],
            Row(
                contender: label, size: count,
                figures: [
                    "bytesPerSubscriptionWithClosure": bytes, "closureContextBytes": closureBytes,
                    "bytesPerSubscriptionWithoutClosure": bytes - closureBytes,
                    "notificationCenterOverOurs": foundation / bytes,
                ],
                target: check?.target, pass: check?.pass))
    }
    return section
}
