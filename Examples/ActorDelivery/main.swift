// Handlers isolated to an actor: `swift run ActorDelivery`.
//
// A cache actor and a session actor subscribe with `on:`; their handlers get the actor as an
// `isolated` parameter and touch its state without `await`. Posts of one thread arrive in order,
// the poster never waits, the actor is held weakly, and a token owned by the actor goes with it.

import Subscriptions

extension Topic where Payload == Int {
    static let reading = Topic("reading")
}

actor Cache {
    var values: [Int] = []
}

actor Session {
    private(set) var logins: [String] = []
    private var token: Subscription?

    /// The session owns its own token: when the session goes, so does the subscription.
    func start(_ center: PostCenter) {
        token = center.subscribe("login", on: self) { session, post in
            session.didLogin(post.flag)
            handledOne.yield()
        }
    }

    func didLogin(_ flag: String) { logins.append(flag) }

    deinit { sessionEnded.yield() }
}

/// Hears the session's deinit.
let (sessionEnd, sessionEnded) = AsyncStream<Void>.makeStream()

/// A global actor: its shared instance is an actor like any other.
@globalActor actor Sensors {
    static let shared = Sensors()
    var last: Int?

    /// Runs `operation`, isolated to `@Sensors`, from code already running on the global actor
    /// (such as a handler subscribed `on: Sensors.shared`); stops the process anywhere else.
    static func assumeIsolated<T: Sendable>(_ operation: @Sensors () throws -> T) rethrows -> T {
        Sensors.preconditionIsolated("not on the Sensors global actor")
        return try withoutActuallyEscaping(operation) { operation in
            try unsafeBitCast(operation, to: (() throws -> T).self)()
        }
    }
}

/// State isolated to the global actor, declared outside it.
@Sensors final class Dashboard {
    static let shared = Dashboard()
    var text = ""
}

/// Every handler below says "handled" here, so the story can wait for them without sleeping.
let (handled, handledOne) = AsyncStream<Void>.makeStream()

let center = PostCenter()
let cache = Cache()
let reading = center.subscribe(.reading, on: cache) { cache, value in
    cache.values.append(value)  // the actor's state, synchronously: `cache` is isolated here
    handledOne.yield()
}
let sensors = center.subscribe(.reading, on: Sensors.shared) { sensors, value in
    sensors.last = value  // the shared instance's own state, through the parameter
    Sensors.assumeIsolated { Dashboard.shared.text = "last reading: \(value)" }  // @Sensors state
    handledOne.yield()
}

var session: Session? = Session()
await session!.start(center)

for value in 1...5 { center.post(.reading, value) }  // returns at once: 2 subscribers each
center.post("login", flag: "sso")

var waiting = 11  // 5 readings to 2 actors, 1 login
for await _ in handled {
    waiting -= 1
    if waiting == 0 { break }
}
print("cache:", await cache.values)  // [1, 2, 3, 4, 5], in post order
print("sensors:", await Sensors.shared.last ?? 0, "/", await Dashboard.shared.text)
print("session:", await session!.logins)  // ["sso"]

print("subscribers of login:", center.subscriptionCount(for: "login"))  // 1
session = nil  // the session goes, and its token with it
for await _ in sessionEnd { break }  // (a delivery running on it holds it until it returns)
print("after the session went:", center.subscriptionCount(for: "login"), center.post("login"))  // 0 0
withExtendedLifetime((reading, sensors)) {}
