/// A task start put off until the calling thread's post ends (`_ThreadRecord.deferredStarts`,
/// a chain through `nextDeferred`, touched only by that thread).
class _DeferredStart: @unchecked Sendable {
    // @unchecked: `nextDeferred` is touched only by the thread whose chain holds the object.
    @exclusivity(unchecked) final var nextDeferred: _DeferredStart?

    /// Starts what was put off.
    func start() { fatalError("abstract") }

    /// Puts `start()` off until the post in progress on `record`'s thread ends.
    final func deferStart(to record: _ThreadRecord) {
        let head = record.deferredStarts
        if head != 0 {
            nextDeferred = Unmanaged<_DeferredStart>.fromOpaque(UnsafeRawPointer(bitPattern: head).unsafelyUnwrapped)
                .takeRetainedValue()
        }
        record.deferredStarts = UInt(bitPattern: Unmanaged.passRetained(self).toOpaque())
    }

    /// Starts everything put off on `record`'s thread, which has just ended a post.
    @inline(never)
    static func startAll(_ record: _ThreadRecord) {
        var next: _DeferredStart? = Unmanaged<_DeferredStart>.fromOpaque(
            UnsafeRawPointer(bitPattern: record.deferredStarts).unsafelyUnwrapped
        ).takeRetainedValue()
        record.deferredStarts = 0
        while let item = next {
            next = item.nextDeferred
            item.nextDeferred = nil
            item.start()
        }
    }
}
