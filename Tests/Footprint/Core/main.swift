// A program that imports only Subscriptions and posts once, for Scripts/footprint-check.sh:
// it must load no Foundation, and prints its resident memory (VmRSS, kB).
import Subscriptions

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

let center = PostCenter()
let token = center.subscribe("hello") { post in precondition(post.flag == "world") }
precondition(center.post("hello", flag: "world") == 1)
withExtendedLifetime(token) {}
print(residentKilobytes())

/// The `VmRSS` line of /proc/self/status, in kB (0 where there is no /proc).
func residentKilobytes() -> Int {
    guard let file = fopen("/proc/self/status", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix("VmRSS:") {
            return Int(text.dropFirst(6).filter { $0.isNumber }) ?? 0
        }
    }
    return 0
}
