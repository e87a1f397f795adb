extension PostCenter {
    /// Passes a post's delivery count through, reporting ``Diagnostic/unheardPost(name:)`` when it
    /// is 0 and diagnostics ask for it. A post that reached somebody pays one compare.
    @inline(__always)
    func _heard(_ delivered: Int, _ key: borrowing _NameKey) -> Int {
        if delivered == 0 && _diagnosing.load(ordering: .relaxed) { _reportUnheard(key.name) }
        return delivered
    }

    /// `_heard` for a post that pattern subscriptions may match: when the center has any
    /// (`_patternState`), delivers the post to them too (`envelope` makes what they receive)
    /// and adds their count. A center without patterns pays one relaxed load.
    @inline(__always)
    func _heard(
        _ delivered: Int, _ key: borrowing _NameKey, sender: AnyObject?, _ envelope: () -> PostObject
    ) -> Int {
        var delivered = delivered
        if _patternState.load(ordering: .relaxed) != 0 {
            delivered &+= _postPatterns(key.name, sender: sender, envelope())
        }
        return _heard(delivered, key)
    }

    @inline(never)
    func _reportUnheard(_ name: String) {
        guard let diagnostics, diagnostics.reportsUnheardPosts else { return }
        diagnostics.report(.unheardPost(name: name))
    }
}
