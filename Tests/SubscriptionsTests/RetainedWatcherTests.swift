import Subscriptions
import Synchronization
import Testing

/// The `package` hook a relay keeps a name's retained post on a server with
/// (`PostCenter._watchRetained`): told of each retained post around its delivery, and of each clear;
/// plain posts and other names never reach it.
@Suite("Retained watchers: the hook relays use")
struct RetainedWatcherTests {
    /// What a watcher saw, in order.
    final class Log: Sendable {
        let entries = Mutex<[String]>([])
        func add(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    @Test func aWatcherWrapsEachRetainedPostOfItsNameAndHearsEachClear() {
        let center = PostCenter()
        let log = Log()
        let topic = Topic<Int>("level")
        let token = center.subscribe(topic) { log.add("handler \($0)") }
        let watcher = _RetainedWatcher(
            posting: { deliver in
                log.add("before")
                let count = deliver()
                log.add("after \(count)")
                return count
            },
            cleared: { log.add("cleared") })
        center._watchRetained("level", watcher)
        center.post(topic, 1)  // not retained: the watcher is not told
        #expect(center.post(topic, 2, retain: true) == 1)
        center.post(Topic<Int>("other"), 3, retain: true)  // another name
        center.clearRetained(topic)
        center._unwatchRetained("level", watcher)
        center.post(topic, 4, retain: true)
        center.clearRetained(topic)
        #expect(log.all == ["handler 1", "before", "handler 2", "after 1", "cleared", "handler 4"])
        #expect(center.retained(topic) == nil)
        token.cancel()
    }

    @Test func unwatchingAnOlderWatcherKeepsTheNewerOne() {
        let center = PostCenter()
        let log = Log()
        func logging(_ name: String) -> _RetainedWatcher {
            _RetainedWatcher(
                posting: { deliver in
                    log.add(name)
                    return deliver()
                }, cleared: {})
        }
        let first = logging("first")
        let second = logging("second")
        center._watchRetained("n", first)
        center._watchRetained("n", second)
        center._unwatchRetained("n", first)
        center.post("n", flag: "x", retain: true)
        #expect(log.all == ["second"])
        #expect(center.retained("n")?.flag == "x")
    }
}
