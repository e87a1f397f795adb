// The program of Scripts/walk-check.sh: stops the process at the deepest point of one of the walks
// issue 42 names, so that Swift's backtracer prints the stack with files and lines. The script
// checks that the stack enters each library file at most once on the way down.
//
//   walks immediate   a typed post to an immediate handler (stopped inside the handler)
//   walks actor       a typed post to a handler on an actor (stopped inside it, on the drain)
//   walks cancel      cancel() beside a running post (the cancelling thread stopped while it
//                     waits for the handler)
import Foundation
import Subscriptions
import Synchronization

actor Inbox {
    func note(_ value: Int) { fatalError("walk: at the actor handler") }
}

let center = PostCenter()
let cancelling = pthread_self()
let topic = Topic<Int>("walk")
switch CommandLine.arguments.dropFirst().first ?? "" {
case "immediate":
    let token = center.subscribe(topic) { _ in fatalError("walk: at the immediate handler") }
    center.post(topic, 1)
    withExtendedLifetime(token) {}
case "actor":
    let inbox = Inbox()
    let token = center.subscribe(topic, on: inbox) { inbox, value in inbox.note(value) }
    center.post(topic, 2)
    sleep(30)
    withExtendedLifetime(token) {}
case "cancel":
    let started = DispatchSemaphore(value: 0)
    let slot = Mutex<Subscription?>(nil)
    let token = center.subscribe(topic) { _ in
        started.signal()
        // Once cancel() began (the token reads inactive), give it time to reach its wait, then
        // stop the cancelling thread there: its stack is the one printed.
        while slot.withLock({ $0?.isActive ?? true }) { usleep(1_000) }
        usleep(300_000)
        pthread_kill(cancelling, SIGABRT)
        sleep(30)
    }
    slot.withLock { $0 = token }
    let poster = Thread { center.post(topic, 3) }
    poster.start()
    started.wait()
    token.cancel()
default:
    fatalError("usage: walks immediate|actor|cancel")
}
