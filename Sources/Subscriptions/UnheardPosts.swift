extension PostCenter {
    /// Passes a post's delivery count through, reporting ``Diagnostic/unheardPost(name:)`` when it
    /// is 0 and diagnostics ask for it. A post that reached somebody pays one compare.
    @inline(__always)
    func _heard(_ delivered: Int, _ key: borrowing _NameKey) -> Int {
        if delivered == 0 && _diagnosing.load(ordering: .relaxed) { _reportUnheard(key.name) }
        return delivered
    }

    @inline(never)
    func _reportUnheard(_ name: String) {
        guard let diagnostics, diagnostics.reportsUnheardPosts else { return }
        diagnostics.report(.unheardPost(name: name))
    }
}
