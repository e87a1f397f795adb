// swift-tools-version:6.2
import PackageDescription

// `Mutex` and `Atomic` from the Synchronization module need these OS versions on Apple platforms.
let platforms: [SupportedPlatform] = [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)]

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

// The Redis relay (Relays/Redis/README.md) links hiredis and OpenSSL, so it is built only with the
// package trait "Redis": `.package(url: …, from: …, traits: ["Redis"])` in a consumer's manifest,
// `swift build --traits Redis` here. Without it the SubscriptionsRedis module is empty and nothing
// needs to be installed. No pkg-config on Linux: Debian's hiredis.pc adds -D_FILE_OFFSET_BITS=64,
// which SwiftPM refuses with a warning on every build, and the headers and libraries are on the
// default paths; Homebrew's are not (openssl@3 is keg-only), so macOS asks pkg-config.
func pkgConfig(_ name: String) -> String? {
    #if os(macOS)
        return name
    #else
        return nil
    #endif
}

let package = Package(
    name: "Subscriptions",
    platforms: platforms,
    products: [
        .library(name: "Subscriptions", targets: ["Subscriptions"]),
        // NotificationCenter interop; the only product that loads Foundation.
        .library(name: "SubscriptionsFoundation", targets: ["SubscriptionsFoundation"]),
        // For users' test targets: records posts and waits for them.
        .library(name: "SubscriptionsTestKit", targets: ["SubscriptionsTestKit"]),
        // Relays posts between processes through Redis; empty unless the trait "Redis" is enabled.
        .library(name: "SubscriptionsRedis", targets: ["SubscriptionsRedis"]),
    ],
    traits: [
        .trait(
            name: "Redis",
            description: "Builds SubscriptionsRedis, the Redis relay: needs libhiredis-dev and libssl-dev (Debian) "
                + "or hiredis and openssl@3 (Homebrew)")
    ],
    targets: [
        .systemLibrary(
            name: "CHiredis", path: "Relays/Redis/Sources/CHiredis", pkgConfig: pkgConfig("hiredis"),
            providers: [.apt(["libhiredis-dev"]), .brew(["hiredis"])]),
        .systemLibrary(
            name: "COpenSSL", path: "Relays/Redis/Sources/COpenSSL", pkgConfig: pkgConfig("openssl"),
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]),
        .target(
            name: "SubscriptionsRedis",
            dependencies: [
                "Subscriptions", .target(name: "CHiredis", condition: .when(traits: ["Redis"])),
                .target(name: "COpenSSL", condition: .when(traits: ["Redis"])),
            ],
            path: "Relays/Redis/Sources/SubscriptionsRedis", swiftSettings: strict),
        .target(name: "_SubscriptionsShims"),
        .target(
            name: "Subscriptions", dependencies: ["_SubscriptionsShims"], exclude: ["Engine/DESIGN.md"],
            swiftSettings: strict),
        .target(name: "SubscriptionsFoundation", dependencies: ["Subscriptions"], swiftSettings: strict),
        // Test helpers both suites use (a token slot, a joinable thread); not a product.
        .target(
            name: "SubscriptionsTestSupport", dependencies: ["Subscriptions"], path: "Tests/TestSupport",
            swiftSettings: strict),
        .testTarget(
            name: "SubscriptionsTests",
            dependencies: ["Subscriptions", "SubscriptionsFoundation", "SubscriptionsTestSupport"],
            swiftSettings: strict),
        .testTarget(
            name: "SubscriptionsFoundationTests",
            dependencies: ["SubscriptionsFoundation", "SubscriptionsTestSupport"], swiftSettings: strict),
        .target(name: "SubscriptionsTestKit", dependencies: ["Subscriptions"], swiftSettings: strict),
        .testTarget(
            name: "SubscriptionsTestKitTests", dependencies: ["SubscriptionsTestKit", "Subscriptions"],
            swiftSettings: strict),
        .executableTarget(
            name: "ActorDelivery", dependencies: ["Subscriptions"], path: "Examples/ActorDelivery",
            swiftSettings: strict),
        .executableTarget(
            name: "Quickstart", dependencies: ["Subscriptions"], path: "Examples/Quickstart", swiftSettings: strict),
        .executableTarget(
            name: "ProtocolObservers", dependencies: ["Subscriptions"], path: "Examples/ProtocolObservers",
            swiftSettings: strict),
        .executableTarget(
            name: "AsyncStreams", dependencies: ["SubscriptionsFoundation"], path: "Examples/AsyncStreams",
            swiftSettings: strict),
        .executableTarget(
            name: "SubscriptionsBenchmarks", dependencies: ["Subscriptions"],
            path: "Benchmarks/SubscriptionsBenchmarks", swiftSettings: strict),
        .executableTarget(
            name: "LeakCheck", dependencies: ["SubscriptionsFoundation"], path: "Tests/LeakCheck",
            swiftSettings: strict),
        // Scripts/footprint-check.sh: the core loads no Foundation.
        .target(name: "FootprintSupport", path: "Tests/Footprint/Support", swiftSettings: strict),
        .executableTarget(
            name: "FootprintCore", dependencies: ["Subscriptions", "FootprintSupport"], path: "Tests/Footprint/Core",
            swiftSettings: strict),
        .executableTarget(
            name: "FootprintFoundation", dependencies: ["Subscriptions", "FootprintSupport"],
            path: "Tests/Footprint/Foundation", swiftSettings: strict),
    ]
)
