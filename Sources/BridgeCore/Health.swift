import BinaryCoding
import Foundation
import Synchronization

/// The one place an event is counted: commands by terminal status, errors by stable code,
/// notifications received — for `<base>/bridge/health` (`shared/spec/bridge.md`) and, in the same
/// call, for the metrics endpoint's ``BridgeMetrics``. Shared by every device session; callers
/// count through ``ended(_:device:_:error:at:)``, ``rejected(device:_:)`` and
/// ``notification(_:)``, never the two halves apart.
final class BridgeCounters: Sendable {
    let metrics = BridgeMetrics()
    struct Counts {
        var commands: [String: Int] = [:]
        var errors: [String: Int] = [:]
        var notifications = 0
    }
    let counts = Mutex(Counts())

    /// A command ended: its health count and its metrics (by command, status, error, duration).
    func ended(_ cmd: PendingCommand, device: String, _ status: CommandStatus, error: CommandError?, at now: BridgeInstant) {
        command(status, error)
        metrics.ended(cmd, device: device, status, error: error, at: now)
    }

    /// A command refused before it reached a device (unknown device, bad payload): an error for
    /// the health counts, and for the device's metrics when it names one.
    func rejected(device: String?, _ error: CommandError) {
        command(.error, error)
        if let device { metrics.rejected(device: device, error) }
    }

    /// A notification arrived from a device.
    func notification(_ device: DeviceMetrics) {
        counts.withLock { $0.notifications += 1 }
        device.notifications.increment()
    }

    private func command(_ status: CommandStatus, _ error: CommandError?) {
        guard status.isTerminal else { return }
        counts.withLock { c in
            c.commands[status.rawValue, default: 0] += 1
            if let error { c.errors[error.code.rawValue, default: 0] += 1 }
        }
    }

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
