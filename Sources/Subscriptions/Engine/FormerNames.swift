// Former spellings of two engine types, for the files outside Engine/ that still use them
// (`PostCenter.swift`, `PostCenter+Variants.swift`, `AsyncPosts.swift`, `AsyncPostsBuffer.swift`):
// those files are being rewritten in parallel, and a rename here must not break their build.
// Delete this file once no file spells `_Slow` or `_Lock`.

/// See `_OptionsEntry`.
typealias _Slow<Payload> = _OptionsEntry<Payload>

/// See `_PlatformMutex`.
typealias _Lock<State: ~Copyable> = _PlatformMutex<State>
