// swift-tools-version:6.2
import PackageDescription

// `Mutex` and `Atomic` from the Synchronization module need these OS versions on Apple platforms.
let platforms: [SupportedPlatform] = [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)]

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "Subscriptions",
    platforms: platforms,
    products: [
        .library(name: "Subscriptions", targets: ["Subscriptions"])
    ],
    targets: [
        .target(name: "_SubscriptionsShims"),
        .target(
            name: "Subscriptions", dependencies: ["_SubscriptionsShims"], exclude: ["Engine/DESIGN.md"],
            swiftSettings: strict),
        .testTarget(name: "SubscriptionsTests", dependencies: ["Subscriptions"], swiftSettings: strict),
        .executableTarget(
            name: "Quickstart", dependencies: ["Subscriptions"], path: "Examples/Quickstart", swiftSettings: strict),
        .executableTarget(
            name: "ProtocolObservers", dependencies: ["Subscriptions"], path: "Examples/ProtocolObservers",
            swiftSettings: strict),
        .executableTarget(
            name: "AsyncStreams", dependencies: ["Subscriptions"], path: "Examples/AsyncStreams", swiftSettings: strict),
        .executableTarget(
            name: "SubscriptionsBenchmarks", dependencies: ["Subscriptions"],
            path: "Benchmarks/SubscriptionsBenchmarks", swiftSettings: strict),
        .executableTarget(
            name: "LeakCheck", dependencies: ["Subscriptions"], path: "Tests/LeakCheck", swiftSettings: strict),
    ]
)
