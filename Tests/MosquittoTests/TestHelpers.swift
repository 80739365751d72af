import Foundation
@testable import Mosquitto

#if canImport(Glibc)
import Glibc
#endif

/// A weak reference to a client's core: nil once the core is freed (its libmosquitto instance
/// destroyed, and nothing — driver, connect helper thread — holding it any more).
struct WeakCore: Sendable {
    weak var core: MQTTClientCore?
    init(_ core: MQTTClientCore) { self.core = core }
}

/// Whether this machine has a TCP socket in SYN_SENT towards `port` on loopback
/// (`/proc/net/tcp`): a connect waiting for the SYN-ACK.
func connectPending(toPort port: Int) -> Bool {
    // Read to the end (procfs reports no size; a busy table is longer than one page).
    let fd = open("/proc/net/tcp", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16384)
    while true {
        let n = read(fd, &chunk, chunk.count)
        if n <= 0 { break }
        bytes += chunk[..<n]
    }
    let table = String(decoding: bytes, as: UTF8.self)
    let remote = String(format: "0100007F:%04X", port)
    return table.split(separator: "\n").dropFirst().contains { line in
        let fields = line.split(separator: " ")
        return fields.count > 3 && fields[2] == remote && fields[3] == "02"
    }
}
