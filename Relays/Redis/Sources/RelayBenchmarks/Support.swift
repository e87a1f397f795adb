// What every mode of RelayBenchmarks shares: the typed post it measures (`Tick`), the clock,
// output and failure, CPU time, and the statistics and formatting of the results.
import Foundation
import Subscriptions

struct Tick: Codable, Sendable {
    var seq: Int
    var sent: UInt64
}

extension Topic where Payload == Tick {
    static let tick = Topic("bench.tick")
}

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("RelayBenchmarks: \(message)\n".utf8))
    exit(1)
}

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

func percentile(_ sorted: [UInt64], _ p: Double) -> UInt64 {
    sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

/// CPU time this process has used (all threads, user and system), in microseconds: unlike rates,
/// hardly affected by other load on the machine.
func cpuMicros() -> Double {
    var usage = rusage()
    #if os(Linux)
        getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
        getrusage(RUSAGE_SELF, &usage)
    #endif
    let user = Double(usage.ru_utime.tv_sec) * 1e6 + Double(usage.ru_utime.tv_usec)
    return user + Double(usage.ru_stime.tv_sec) * 1e6 + Double(usage.ru_stime.tv_usec)
}

func rate(_ value: Double) -> String { String(format: "%9.0f", value) }
