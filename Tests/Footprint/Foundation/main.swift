// The same program importing Foundation too (what `import Subscriptions` cost before the bridge
// moved out), for Scripts/footprint-check.sh to compare with.
import FootprintSupport
import Foundation
import Subscriptions

let center = PostCenter()
precondition(!NotificationCenter.default.description.isEmpty)
let token = center.subscribe("hello") { post in precondition(post.flag == "world") }
precondition(center.post("hello", flag: "world") == 1)
withExtendedLifetime(token) {}
print(residentKilobytes())
