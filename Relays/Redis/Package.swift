// swift-tools-version:6.2
import PackageDescription

// The development package of the Redis relay: its tests, the `RelayPeer` test helper, the
// benchmark and the example. The relay itself (the SubscriptionsRedis library, and CHiredis, the
// module of hiredis and OpenSSL) is a product of the repository's root package, built there with
// the package trait "Redis", so that users need one dependency line for the core and the relay.
// This package depends on the root by path, through the symbolic link
// `Dependencies/Subscriptions` -> `../../..`: a path dependency's identity is its folder's name,
// and the link gives it the same one ("subscriptions") whatever the checkout is called.
let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]
let relay: [Target.Dependency] = [
    .product(name: "SubscriptionsRedis", package: "Subscriptions"),
    .product(name: "Subscriptions", package: "Subscriptions"),
]

let package = Package(
    name: "SubscriptionsRedisDevelopment",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    dependencies: [
        .package(path: "Dependencies/Subscriptions", traits: ["Redis"])
    ],
    targets: [
        .executableTarget(name: "RelayPeer", dependencies: relay, swiftSettings: strict),
        .executableTarget(name: "RelayBenchmarks", dependencies: relay, swiftSettings: strict),
        .executableTarget(
            name: "RelayChat", dependencies: relay, path: "Examples/RelayChat", swiftSettings: strict),
        .testTarget(
            name: "SubscriptionsRedisTests", dependencies: relay + ["RelayPeer"], swiftSettings: strict),
    ]
)
