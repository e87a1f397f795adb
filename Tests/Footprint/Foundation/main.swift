// The same program importing Foundation too (what `import Subscriptions` cost before the bridge
// moved out), for Scripts/footprint-check.sh to compare with.
import Foundation
import Subscriptions

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

let center = PostCenter()
precondition(!NotificationCenter.default.description.isEmpty)
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
