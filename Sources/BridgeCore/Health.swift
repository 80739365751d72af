import BinaryCoding
import Foundation
import Synchronization

/// Counters for `<base>/bridge/health` (`shared/spec/bridge.md`): commands by terminal status,
/// errors by stable code, notifications received. Shared by every device session, and so is the
/// metrics endpoint's ``BridgeMetrics`` that rides along.
final class BridgeCounters: Sendable {
    let metrics = BridgeMetrics()
    struct Counts {
        var commands: [String: Int] = [:]
        var errors: [String: Int] = [:]
        var notifications = 0
    }
    let counts = Mutex(Counts())

    func command(_ status: CommandStatus, _ error: CommandError?) {
        guard status.isTerminal else { return }
        counts.withLock { c in
            c.commands[status.rawValue, default: 0] += 1
            if let error { c.errors[error.code.rawValue, default: 0] += 1 }
        }
    }

    func notification() { counts.withLock { $0.notifications += 1 } }

    var json: JSONObject {
        counts.withLock { c in
            [
                "commands": .object(JSONObject(c.commands.sorted { $0.key < $1.key }.map { (key: $0.key, value: JSONValue.int(Int64($0.value))) })),
                "errors": .object(JSONObject(c.errors.sorted { $0.key < $1.key }.map { (key: $0.key, value: JSONValue.int(Int64($0.value))) })),
                "notifications": .int(Int64(c.notifications)),
            ]
        }
    }
}

/// Resident memory of this process in bytes (Linux `/proc/self/statm`), nil elsewhere.
func residentMemoryBytes() -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}
