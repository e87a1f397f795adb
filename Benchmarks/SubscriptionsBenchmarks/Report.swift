import Foundation

/// One target (of the issue that set it), judged on one figure of this run.
struct Check: Codable {
    var measure: String
    var target: String
    var measured: Double
    var measuredText: String
    var pass: Bool
}

/// One printed row, as it goes into the JSON file: named figures plus the row's verdict.
struct Row: Codable {
    var contender: String
    var size: Int?
    var figures: [String: Double]
    var target: String?
    var pass: Bool?
}

/// A titled table of the report. The JSON file gets its rows and checks, not the printed cells.
struct Section: Encodable {
    var id: String
    var title: String
    var notes: [String]
    var columns: [String]
    var lines: [[String]]
    var rows: [Row]
    var checks: [Check]

    enum CodingKeys: String, CodingKey {
        case id, title, notes, rows, checks
    }

    init(id: String, title: String, notes: [String], columns: [String]) {
        self.id = id
        self.title = title
        self.notes = notes
        self.columns = columns
        self.lines = []
        self.rows = []
        self.checks = []
    }

    /// Adds a printed line and its JSON row.
    mutating func add(_ line: [String], _ row: Row) {
        precondition(line.count == columns.count, "row of \(line.count) cells in a table of \(columns.count) columns")
        lines.append(line)
        rows.append(row)
    }

    /// Records a target check and returns its verdict text for the row.
    @discardableResult
    mutating func check(_ measure: String, target: String, measured: Double, text: String, pass: Bool) -> Check {
        let c = Check(measure: measure, target: target, measured: measured, measuredText: text, pass: pass)
        checks.append(c)
        return c
    }
}

/// What the JSON file holds.
struct Report: Encodable {
    var generated: String
    var machine: Machine
    var repetitions: Int
    var minimumRunMilliseconds: Double
    /// "cpu" or "wall": what single-threaded repetitions were timed with.
    var clock: String
    var quick: Bool
    var sections: [Section]
    var checks: [Check]
    var passed: Int
    var total: Int
}

struct Machine: Codable {
    var cpu: String
    var logicalCPUs: Int
    var os: String
    var loadAverageBefore: String
    var loadAverageAfter: String

    static func current(loadBefore: String) -> Machine {
        Machine(
            cpu: cpuModel(), logicalCPUs: ProcessInfo.processInfo.activeProcessorCount,
            os: ProcessInfo.processInfo.operatingSystemVersionString,
            loadAverageBefore: loadBefore, loadAverageAfter: loadAverage())
    }
}

/// The CPU model from `/proc/cpuinfo`, or "unknown".
func cpuModel() -> String {
    guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return "unknown" }
    for line in text.split(separator: "\n") where line.hasPrefix("model name") {
        if let colon = line.firstIndex(of: ":") {
            return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
    }
    return "unknown"
}

/// The 1, 5 and 15 minute load averages from `/proc/loadavg`, or "n/a".
func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "n/a" }
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}

// MARK: Formatting

func fmt(_ value: Double, _ decimals: Int) -> String {
    String(format: "%.\(decimals)f", value)
}

/// Nanoseconds with a precision that suits their size.
func ns(_ value: Double) -> String {
    if value < 10 { return fmt(value, 2) }
    if value < 1000 { return fmt(value, 1) }
    return fmt(value, 0)
}

func times(_ value: Double) -> String {
    value < 10 ? fmt(value, 2) + "×" : fmt(value, 1) + "×"
}

func percent(_ value: Double) -> String {
    fmt(value * 100, 0) + "%"
}

func verdict(_ checks: [Check]) -> String {
    if checks.isEmpty { return "" }
    return checks.allSatisfy(\.pass) ? "PASS" : "FAIL"
}

/// Renders a table: the first column left-aligned, the others right-aligned, except "target" and
/// "result" which read better left-aligned.
func render(_ columns: [String], _ lines: [[String]]) -> String {
    var widths = columns.map(\.count)
    for line in lines {
        for (i, cell) in line.enumerated() { widths[i] = max(widths[i], cell.count) }
    }
    let leftAligned: Set<String> = ["contender", "target", "result", "measure", "measured"]
    func cell(_ text: String, _ i: Int) -> String {
        let pad = String(repeating: " ", count: widths[i] - text.count)
        return i == 0 || leftAligned.contains(columns[i]) ? text + pad : pad + text
    }
    var out = columns.indices.map { cell(columns[$0], $0) }.joined(separator: "  ") + "\n"
    out += widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ") + "\n"
    for line in lines {
        out += line.indices.map { cell(line[$0], $0) }.joined(separator: "  ") + "\n"
    }
    return out
}

func printSection(_ section: Section) {
    print("## \(section.title)")
    for note in section.notes { print("   " + note) }
    print()
    print(render(section.columns, section.lines))
}

func printSummary(_ checks: [Check]) {
    print("## Targets (of every issue that set one)")
    print()
    let lines = checks.map { [$0.measure, $0.target, $0.measuredText, $0.pass ? "PASS" : "FAIL"] }
    print(render(["measure", "target", "measured", "result"], lines))
    let passed = checks.filter(\.pass).count
    print("\(passed) of \(checks.count) targets met.")
}

func writeJSON(_ report: Report, to path: String) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    let data = try encoder.encode(report)
    try data.write(to: URL(fileURLWithPath: path))
}

/// `100000` as `100,000`, independent of the locale.
func grouped(_ n: Int) -> String {
    let digits = String(n.magnitude)
    var out = ""
    for (i, ch) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(ch)
    }
    return n < 0 ? "-" + out : out
}
