// swift-tools-version:6.2
import PackageDescription

// Cases that must NOT compile (Cases/fail-*.swift) and controls that must (Cases/ok-*.swift).
// Scripts/compile-fail-check.sh copies each case in turn to Sources/Case/main.swift and builds.
let package = Package(
    name: "CompileFail",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    dependencies: [.package(name: "Subscriptions", path: "../..")],
    targets: [
        .executableTarget(
            name: "Case", dependencies: [.product(name: "Subscriptions", package: "Subscriptions")],
            swiftSettings: [.swiftLanguageMode(.v6)])
    ]
)
