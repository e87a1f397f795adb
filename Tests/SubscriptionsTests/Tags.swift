import Testing

/// Where a test came from. The suites are laid out by guarantee (`GuaranteeNN…`, one per numbered
/// rule of the Guarantees article) and by feature; a tag records why the test was written, so that
/// `swift test --filter` and the test navigator can still select the tests of one origin.
extension Tag {
    /// Written from the text of a rule or a feature's documentation.
    @Tag static var pin: Self

    /// Written against a mutant of `Scripts/mutants.txt` (or its relay list) that survived the
    /// suite: it fails on (nearly) every run of that mutant.
    @Tag static var mutantPin: Self

    /// Reproduces an engine bug that was found and fixed.
    @Tag static var regression: Self

    /// Compares the center with a plain reference model after every random operation.
    @Tag static var modelBased: Self

    /// Races many threads through many operations with exact accounting.
    @Tag static var stress: Self
}
