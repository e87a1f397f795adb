// Handlers that throw. Every handler type is `throws`, so a handler may use `try` and a
// non-throwing closure still converts (no thunk: the two function types share a representation).
// Wherever the engine calls a handler (the walk's direct calls, `deliver`, queued, main-actor,
// actor and paced calls, replays) it catches what the handler throws, reports it here and goes
// on: the next handler of the post runs, and the call counts as run in `post`'s result. The
// report goes from the route (which knows its name) through its stripe's tracker to the center
// (`_EngineReporting._noteHandlerThrew`), which hands it to `PostCenter.diagnostics` as
// `Diagnostic.handlerThrew`, or, with no diagnostics set or the center gone, prints it once per
// call site (`_ThrownErrors`). All of it is out of line: a handler that does not throw costs its
// caller one test of the error register.
import Synchronization

extension _Route {
    /// Reports that the handler of the entry made at `site`, called for a post of this route's
    /// name, threw `error`. Runs on the thread that ran the handler, with no lock held.
    @inline(never)
    func noteThrew(_ error: any Error, site: UInt16) {
        if let reporter = stripe.tracker.reporter {
            reporter._noteHandlerThrew(key, site: site, error)
        } else {
            _ThrownErrors.printOnce(key.name, site: site, error)
        }
    }
}

/// What is printed when a handler throws and nobody listens to diagnostics: one line on standard
/// error, once per call site for the life of the process (a handler that throws on every post
/// would otherwise flood the log).
enum _ThrownErrors {
    /// The call sites already printed (`_CallSites` ids; 0, an unknown site, counts as one).
    private static let printed = _PlatformMutex<Set<UInt16>>([])

    /// Prints that a handler of `name` made at call site `site` threw `error`, unless a handler
    /// of that site was printed before. The message is built and written with no lock held.
    static func printOnce(_ name: String, site: UInt16, _ error: any Error) {
        guard printed.withLock({ $0.insert(site).inserted }) else { return }
        _writeStandardError(message(name, site: site, error) + "\n")
    }

    /// The printed line (also what `Diagnostic.handlerThrew`'s `description` says).
    static func message(_ name: String, site: UInt16, _ error: any Error) -> String {
        let place = _CallSites.shared.site(site).map { " (subscribed at \($0.fileID):\($0.line))" } ?? ""
        return "Subscriptions: a handler of \"\(name)\"\(place) threw \(String(describing: error)); "
            + "the post went on with the next handler. Set PostCenter.diagnostics to handle "
            + ".handlerThrew, or catch the error in the handler."
    }
}
