import Dispatch
import Subscriptions
import Testing

/// Not `Sendable`: a mutable class, the `Draft` of issue 38.
private final class Draft {
    var text = "draft"
}

/// A `Sendable` counterpart, whose typed posts stay readable everywhere.
private final class Note: Sendable {
    let text = "note"
}

extension Topic where Payload == Draft {
    fileprivate static let edited = Topic("nonsendable.edited")
}

/// What an actor saw of the envelopes it was handed.
private actor Store {
    var seen: [String] = []
    func note(_ what: String) { seen.append(what) }
}

/// What a plain subscriber can read of an envelope that carries a non-`Sendable` typed payload,
/// without the unsafe spelling.
private func readable(_ post: PostObject) -> String {
    if post.data != nil { return "data" }
    if post.payload(as: (any Sendable).self) != nil { return "payload as any Sendable" }
    if post.payload(as: PostObject.self) != nil { return "payload as PostObject" }
    return "nothing"
}

/// Guarantees, "Sendable payloads": a payload that is not `Sendable` never crosses to another
/// thread or actor unless the reading code says `unsafePayload(as:)`; the compiler rejects
/// `payload(as:)` of a non-`Sendable` type (Tests/CompileFail).
@Suite("A non-Sendable payload stays where it was posted", .tags(.pin))
struct NonSendablePayloadTests {
    @Test func aNonSendableTypedPayloadReachesItsTypedImmediateSubscribers() {
        let center = PostCenter()
        let draft = Draft()
        let got = Recorder<ObjectIdentifier>()
        let token = center.subscribe(.edited) { got.append(ObjectIdentifier($0)) }
        #expect(center.post(.edited, draft) == 1)
        #expect(got.values == [ObjectIdentifier(draft)])
        withExtendedLifetime(token) {}
    }

    @Test func aPlainImmediateSubscriberReadsItOnlyThroughUnsafePayload() {
        let center = PostCenter()
        let draft = Draft()
        let seen = Recorder<String>()
        let unsafe = Recorder<ObjectIdentifier?>()
        let token = center.subscribe("nonsendable.edited") { post in
            seen.append(readable(post))
            unsafe.append(post.unsafePayload(as: Draft.self).map(ObjectIdentifier.init))
        }
        #expect(center.post(.edited, draft) == 1)
        #expect(seen.values == ["nothing"])
        #expect(unsafe.values == [ObjectIdentifier(draft)])
        withExtendedLifetime(token) {}
    }

    /// The program of issue 38: a plain subscription of the name delivered on an actor.
    @Test func aPlainSubscriptionOnAnActorIsNeverHandedTheNonSendablePayload() async {
        let center = PostCenter()
        let store = Store()
        let draft = Draft()
        let token = center.subscribe("nonsendable.edited", on: store) { store, post in
            store.note(readable(post))
        }
        #expect(center.post(.edited, draft) == 1)
        await center.waitForPendingDeliveries()
        #expect(await store.seen == ["nothing"])
        withExtendedLifetime((token, draft)) {}
    }

    @Test func aQueuedPlainSubscriptionIsNeverHandedTheNonSendablePayload() async {
        let center = PostCenter()
        let recorder = Recorder<String>()
        let token = center.subscribe("nonsendable.edited", delivery: .queue(DispatchQueue(label: "nonsendable"))) {
            recorder.append(readable($0))
        }
        let draft = Draft()
        #expect(center.post(.edited, draft) == 1)
        await center.waitForPendingDeliveries()
        #expect(recorder.values == ["nothing"])
        withExtendedLifetime((token, draft)) {}
    }

    @Test func anAsyncSequenceOfTheNameIsNeverHandedTheNonSendablePayload() async {
        let center = PostCenter()
        let posts = center.posts("nonsendable.edited")
        let draft = Draft()
        #expect(center.post(.edited, draft) == 1)
        var iterator = posts.makeAsyncIterator()
        let first = await iterator.next()
        #expect(first.map(readable) == "nothing")
        withExtendedLifetime(draft) {}
    }

    /// A typed subscription of the name with another payload type that a `Draft` would cast to
    /// (`any Sendable`, `AnyObject`) receives nothing of the post.
    @Test func typedSubscribersOfAnotherPayloadTypeReceiveNothingOfIt() {
        let center = PostCenter()
        let calls = Counter()
        let anySendable = center.subscribe(Topic<any Sendable>("nonsendable.edited")) { _ in calls.increment() }
        let anyObject = center.subscribe(Topic<AnyObject>("nonsendable.edited")) { _ in calls.increment() }
        let draft = Draft()
        center.post(.edited, draft)
        #expect(calls.count == 0)
        withExtendedLifetime((anySendable, anyObject, draft)) {}
    }

    /// The same shapes with a `Sendable` payload: readable as `data` and with `payload(as:)`.
    @Test func aSendableTypedPayloadStaysReadableAsDataAndPayload() {
        let center = PostCenter()
        let note = Note()
        let data = Recorder<ObjectIdentifier?>()
        let payload = Recorder<ObjectIdentifier?>()
        let token = center.subscribe("nonsendable.note") { post in
            data.append(post.data.map(ObjectIdentifier.init))
            payload.append(post.payload(as: Note.self).map(ObjectIdentifier.init))
        }
        center.post(Topic<Note>("nonsendable.note"), note)
        #expect(data.values == [ObjectIdentifier(note)])
        #expect(payload.values == [ObjectIdentifier(note)])
        withExtendedLifetime(token) {}
    }

    /// A `Sendable` payload posted from generic code that does not know it is `Sendable` takes
    /// the non-`Sendable` form: `payload(as:)` still gives it as exactly its type (which the
    /// `Sendable` requirement on `T` proves safe), and nothing else does.
    @Test func aPayloadPostedFromUnconstrainedGenericCodeIsReadableOnlyAsItsExactType() async {
        func postGenerically<P>(_ center: PostCenter, _ topic: Topic<P>, _ payload: P) -> Int {
            center.post(topic, payload)
        }
        let center = PostCenter()
        let note = Note()
        let exact = Recorder<ObjectIdentifier?>()
        let other = Recorder<String>()
        let token = center.subscribe("nonsendable.generic") { post in
            exact.append(post.payload(as: Note.self).map(ObjectIdentifier.init))
            other.append(readable(post))
        }
        let typed = Recorder<ObjectIdentifier>()
        let queued = center.subscribe(
            Topic<Note>("nonsendable.generic"), delivery: .queue(DispatchQueue(label: "nonsendable.generic"))
        ) { typed.append(ObjectIdentifier($0)) }
        #expect(postGenerically(center, Topic<Note>("nonsendable.generic"), note) == 2)
        #expect(exact.values == [ObjectIdentifier(note)])
        #expect(other.values == ["nothing"])
        await center.waitForPendingDeliveries()
        #expect(typed.values == [ObjectIdentifier(note)])
        withExtendedLifetime((token, queued)) {}
    }

    /// Guarantees 13, "How": an envelope per entry for a payload posted as not `Sendable` (one per
    /// post otherwise).
    @Test func eachPlainSubscriberGetsAnEnvelopeOfItsOwnForANonSendablePayloadAndASharedOneOtherwise() {
        let center = PostCenter()
        // The envelopes themselves, kept alive, so that no address is reused.
        let envelopes = Recorder<PostObject>()
        let first = center.subscribe("nonsendable.envelopes") { envelopes.append($0) }
        let second = center.subscribe("nonsendable.envelopes") { envelopes.append($0) }
        let draft = Draft()
        center.post(Topic<Draft>("nonsendable.envelopes"), draft)
        let withheld = envelopes.values
        center.post(Topic<Note>("nonsendable.envelopes"), Note())
        let shared = Array(envelopes.values.dropFirst(2))
        #expect(withheld.count == 2 && withheld[0] !== withheld[1])
        #expect(shared.count == 2 && shared[0] === shared[1])
        withExtendedLifetime((first, second, draft)) {}
    }
}
