// swift-tools-version:6.2
import PackageDescription

// The Redis relay for Subscriptions: a package of its own so that the core library keeps zero
// dependencies. It depends on the repository's root package by path, through the symbolic link
// `Dependencies/Subscriptions` -> `../../..`: a path dependency's identity is its folder's name,
// and the link gives it the same one ("subscriptions") whatever the checkout is called (a
// checkout named "redis" would otherwise clash with this package's own identity).
let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

#if os(macOS)
    let hiredisPkgConfig: String? = "hiredis"
#else
    let hiredisPkgConfig: String? = nil
#endif

let package = Package(
    name: "SubscriptionsRedis",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "SubscriptionsRedis", targets: ["SubscriptionsRedis"])
    ],
    dependencies: [
        .package(path: "Dependencies/Subscriptions")
    ],
    targets: [
        // No pkg-config on Linux: Debian's hiredis.pc adds -D_FILE_OFFSET_BITS=64, which SwiftPM
        // refuses with a warning on every build, and the headers and libraries are on the default
        // paths anyway. Homebrew's are not, so macOS asks pkg-config.
        .systemLibrary(
            name: "CHiredis", pkgConfig: hiredisPkgConfig,
            providers: [.apt(["libhiredis-dev", "libssl-dev"]), .brew(["hiredis", "openssl@3"])]),
        .target(
            name: "SubscriptionsRedis",
            dependencies: ["CHiredis", .product(name: "Subscriptions", package: "Subscriptions")],
            swiftSettings: strict),
        .executableTarget(name: "RelayPeer", dependencies: ["SubscriptionsRedis"], swiftSettings: strict),
        .executableTarget(name: "RelayBenchmarks", dependencies: ["SubscriptionsRedis"], swiftSettings: strict),
        .executableTarget(
            name: "RelayChat", dependencies: ["SubscriptionsRedis"], path: "Examples/RelayChat",
            swiftSettings: strict),
        .testTarget(
            name: "SubscriptionsRedisTests", dependencies: ["SubscriptionsRedis", "RelayPeer"],
            swiftSettings: strict),
    ]
)
