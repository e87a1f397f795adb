// A program that imports only Subscriptions and posts once, for Scripts/footprint-check.sh:
// it must load no Foundation, and prints its resident memory (VmRSS, kB).
import FootprintSupport
import Subscriptions

let center = PostCenter()
let token = center.subscribe("hello") { post in precondition(post.flag == "world") }
precondition(center.post("hello", flag: "world") == 1)
withExtendedLifetime(token) {}
print(residentKilobytes())
