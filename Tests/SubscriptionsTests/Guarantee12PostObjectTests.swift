import Dispatch
import Foundation
import Testing

@testable import Subscriptions

/// Guarantee 12: `PostObject` never retains its data: once the poster drops the object, `data`
/// is `nil`, also for a delivery still queued. `payload(as:)` returns the data, or a typed post's
/// payload, when it has that type.
@Suite("Guarantee 12: PostObject never retains its data")
struct Guarantee12PostObject {
    @Test(.tags(.pin)) func dataIsHeldWeakly() {
        let live = LiveObjects()
        var data: Tracked? = Tracked("data", live: live)
        let object = PostObject(flag: "f", data: data)
        #expect(object.data === data)
        data = nil
        #expect(live.alive == 0)
        #expect(object.data == nil)
        #expect(object.payload(as: Tracked.self) == nil)
        #expect(object.flag == "f")
    }

    @Test(.tags(.pin)) func defaultsAreAnEmptyFlagAndNoData() {
        let object = PostObject()
        #expect(object.flag == "")
        #expect(object.data == nil)
        #expect(object.payload(as: Int.self) == nil)
        #expect(object.unsafePayload(as: AnyObject.self) == nil)
    }

    @Test(.tags(.pin)) func handlerSeesTheDataWhileThePosterHoldsIt() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let token = center.subscribe("x") { post in
            seen.append("\(post.flag):\(post.payload(as: User.self)?.name ?? "nil"):\(post.data is User)")
        }
        let user = User("ann")
        center.post("x", PostObject(flag: "sso", data: user))
        center.post("x", flag: "pw", data: user)
        #expect(seen.values == ["sso:ann:true", "pw:ann:true"])
        withExtendedLifetime((token, user)) {}
    }

    @Test(.tags(.pin)) func queuedDeliverySeesNilDataOnceThePosterDroppedIt() {
        let center = PostCenter()
        let queue = makeSerialQueue("postobject.queued")
        let live = LiveObjects()
        let seen = Recorder<String>()
        let token = center.subscribe("x", delivery: .queue(queue)) { post in
            seen.append("\(post.flag):\(post.data == nil):\(post.payload(as: Tracked.self) == nil)")
        }
        queue.suspend()
        var data: Tracked? = Tracked("data", live: live)
        #expect(center.post("x", PostObject(flag: "a", data: data)) == 1)
        #expect(center.post("x", flag: "b", data: data) == 1)
        data = nil
        // The pending deliveries hold the envelopes, and the envelopes do not hold the data.
        #expect(live.alive == 0)
        queue.resume()
        queue.sync {}
        #expect(seen.values == ["a:true:true", "b:true:true"])
        withExtendedLifetime(token) {}
    }

    @Test(.tags(.pin)) func queuedDeliverySeesTheDataWhileThePosterStillHoldsIt() {
        let center = PostCenter()
        let queue = makeSerialQueue("postobject.held")
        let seen = Recorder<String>()
        let token = center.subscribe("x", delivery: .queue(queue)) { post in
            seen.append(post.payload(as: User.self)?.name ?? "nil")
        }
        let user = User("bob")
        queue.suspend()
        center.post("x", flag: "", data: user)
        queue.resume()
        queue.sync {}
        #expect(seen.values == ["bob"])
        withExtendedLifetime((token, user)) {}
    }

    @Test(.tags(.pin)) func queuedPlainDeliveryOfATypedClassPayloadDoesNotRetainIt() {
        let center = PostCenter()
        let queue = makeSerialQueue("postobject.typed")
        let live = LiveObjects()
        let seen = Recorder<Bool>()
        let token = center.subscribe("x", delivery: .queue(queue)) { post in
            seen.append(post.payload(as: Tracked.self) == nil)
        }
        queue.suspend()
        var payload: Tracked? = Tracked("payload", live: live)
        #expect(center.post(Topic<Tracked>("x"), payload!) == 1)
        payload = nil
        #expect(live.alive == 0)
        queue.resume()
        queue.sync {}
        #expect(seen.values == [true])
        withExtendedLifetime(token) {}
    }

    @Test(.tags(.pin)) func payloadAsReturnsTheDataOnlyForAMatchingType() {
        let dog = Dog("rex")
        let object = PostObject(data: dog)
        #expect(object.payload(as: Dog.self) === dog)
        #expect(object.payload(as: Animal.self) === dog)
        #expect(object.payload(as: User.self) == nil)
        #expect(object.payload(as: Int.self) == nil)
        #expect(object.unsafePayload(as: AnyObject.self) === dog)
    }

    @Test(.tags(.pin)) func payloadAsReturnsATypedValuePayloadToPlainSubscribers() {
        let center = PostCenter()
        let points = Recorder<Point>()
        let misses = Counter()
        let flags = Recorder<String>()
        let token = center.subscribe("p") { post in
            if let point = post.payload(as: Point.self) { points.append(point) } else { misses.increment() }
            if post.payload(as: Int.self) != nil { misses.increment() }
            if post.data != nil { misses.increment() }  // a value has no object to show as data
            flags.append(post.flag)
        }
        #expect(center.post(Topic<Point>("p"), Point(x: 1, y: 2)) == 1)
        #expect(center.post(Topic<Point>("p"), Point(x: 3, y: 4)) == 1)
        #expect(points.values == [Point(x: 1, y: 2), Point(x: 3, y: 4)])
        #expect(misses.count == 0)
        #expect(flags.values == ["", ""])
        withExtendedLifetime(token) {}
    }

    @Test(.tags(.pin)) func payloadAsReturnsATypedClassPayloadToPlainSubscribers() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let token = center.subscribe("u") { post in
            seen.append(post.payload(as: User.self)?.name ?? "nil")
            seen.append((post.data as? User)?.name ?? "nil")
            seen.append(post.payload(as: Point.self) == nil ? "not-a-point" : "point")
        }
        let user = User("cy")
        #expect(center.post(Topic<User>("u"), user) == 1)
        #expect(seen.values == ["cy", "cy", "not-a-point"])
        withExtendedLifetime((token, user)) {}
    }

    @Test(.tags(.pin)) func queuedPlainDeliveryOfATypedValuePayloadKeepsTheValue() {
        let center = PostCenter()
        let queue = makeSerialQueue("postobject.value")
        let seen = Recorder<Point>()
        let token = center.subscribe("p", delivery: .queue(queue)) { post in
            if let point = post.payload(as: Point.self) { seen.append(point) }
        }
        queue.suspend()
        center.post(Topic<Point>("p"), Point(x: 5, y: 6))
        queue.resume()
        queue.sync {}
        #expect(seen.values == [Point(x: 5, y: 6)])
        withExtendedLifetime(token) {}
    }

    @Test(.tags(.pin)) func theSameEnvelopeReachesEveryPlainSubscriber() {
        let center = PostCenter()
        let envelopes = Recorder<ObjectIdentifier>()
        let tokens = (0..<3).map { _ in center.subscribe("x") { envelopes.append(ObjectIdentifier($0)) } }
        let object = PostObject(flag: "f")
        center.post("x", object)
        #expect(envelopes.values == Array(repeating: ObjectIdentifier(object), count: 3))
        withExtendedLifetime(tokens) {}
    }

    // MARK: PostObject

    /// `PostObject(flag:data:)`: "Empty by default"; a typed post's object payload is held
    /// weakly like `data`, and is the very object posted.
    @Test(.tags(.mutantPin)) func anEnvelopesFlagIsEmptyByDefaultAndATypedObjectPayloadIsItsWeakData() {
        #expect(PostObject().flag == "")
        #expect(PostObject().data == nil)
        let center = PostCenter()
        let topic = Topic<DefaultsSender>("documented-rules.object")
        let seen = Recorder<PostObject>()
        let token = center.subscribe(topic.name) { seen.append($0) }
        var object: DefaultsSender? = DefaultsSender()
        weak var weakObject: DefaultsSender?
        weakObject = object
        center.post(topic, object!)
        #expect(seen.values.first?.data === object)
        #expect(seen.values.first?.flag == "")
        object = nil
        #expect(weakObject == nil, "the envelope kept the typed object payload alive")
        #expect(seen.values.first?.data == nil)
        withExtendedLifetime(token) {}
    }
}
