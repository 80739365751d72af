import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Threads of this process, and how many are MQTTClient network threads.
func threadCounts() -> (all: Int, mqtt: Int) {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    let mqtt = tasks.filter {
        ((try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)) ?? "")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "mqtt-net"
    }.count
    return (tasks.count, mqtt)
}

/// Resident set size in bytes (/proc/self/statm).
func residentBytes() -> Int {
    let text = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? "0 0"
    let pages = Int(text.split(separator: " ")[1]) ?? 0
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}
