import Foundation
import Subscriptions

/// What a post costs the poster when the subscriber is coalesced on the main actor
/// (`delivery: .mainActor.coalesced`) and a payload is already pending, against an immediate post
/// to one subscriber. Issue 28's target: at most 2× the immediate post (no allocation per post
/// while a payload is pending).
func coalescedSection(_ config: RunConfig) -> Section {
    let target = 2.0
    var section = Section(
        id: "coalesced", title: "Post to 1 coalesced main-actor subscriber (payload pending) vs 1 immediate subscriber",
        notes: [
            "Ours: a typed post of an Int to `delivery: .mainActor.coalesced`, from the main thread, which does not drain the",
            "main queue while timed: after the first post a payload is pending and every post replaces it. The handler must not",
            "have run when a repetition ends; after the measurement the main queue is drained once and the handler must run",
            "exactly once, with the last value posted. Reference: the same typed post to one immediate subscriber (the handler",
            "runs in the post). Medians over \(config.repetitions) repetitions; ns per post.",
        ],
        columns: ["contender", "ns/post", "spread", "vs immediate", "target", "result"])
    let topic = Topic<Int>("bench.coalesced")

    let immediateCounter = Counter.make()
    let immediateCenter = PostCenter()
    let immediateToken = immediateCenter.subscribe(topic) { value in immediateCounter.pointer.pointee &+= value }
    let immediate = Case(
        "PostCenter, immediate", prepare: { immediateCounter.reset() },
        body: { n in for _ in 0..<n { immediateCenter.post(topic, postedValue) } },
        verify: { n in expectCalls(immediateCounter.value, n * postedValue, "immediate post") })

    let coalescedCounter = Counter.make()
    let last = Counter.make()
    let center = PostCenter()
    let token = center.subscribe(topic, delivery: .mainActor.coalesced) { @MainActor value in
        coalescedCounter.pointer.pointee &+= 1
        last.pointer.pointee = value
    }
    let heard = Counter.make()
    let coalesced = Case(
        "PostCenter, .mainActor.coalesced", prepare: { heard.reset() },
        body: { n in for i in 0..<n { heard.pointer.pointee &+= center.post(topic, i) } },
        verify: { n in
            expectCalls(heard.value, n, "coalesced posts that reached the subscription")
            expectCalls(coalescedCounter.value, 0, "coalesced handler calls while the main queue is not drained")
        })

    measure([coalesced, immediate], config)
    // Drain the main queue: the one pending payload, the last value posted, is delivered once.
    let lastPosted = coalesced.iterations - 1
    var spins = 0
    while coalescedCounter.value == 0 && spins < 1_000 {
        _ = RunLoop.main.run(mode: .default, before: Date(timeIntervalSinceNow: 0.01))
        spins += 1
    }
    expectCalls(coalescedCounter.value, 1, "coalesced handler calls once the main queue ran")
    expectCalls(last.value, lastPosted, "the coalesced handler's payload (the last value posted)")
    withExtendedLifetime((token, immediateToken)) {}

    let ratio = coalesced.stats.median / immediate.stats.median
    let check = section.check(
        "post to a coalesced main-actor subscriber (payload pending) vs an immediate post", target: "≤ \(Int(target))×",
        measured: ratio, text: times(ratio), pass: ratio <= target)
    for c in [coalesced, immediate] {
        let s = c.stats
        let mine = c === coalesced
        section.add(
            [
                c.label, ns(s.median), percent(s.spread), times(s.median / immediate.stats.median),
                mine ? "≤ \(Int(target))× immediate" : "(reference)", mine ? verdict([check]) : "",
            ],
            Row(
                contender: c.label, size: 1, figures: ["nsPerPost": s.median, "spread": s.spread],
                target: mine ? check.target : nil, pass: mine ? check.pass : nil))
    }
    return section
}
