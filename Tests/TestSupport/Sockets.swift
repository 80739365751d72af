#if canImport(Glibc)
import Glibc
#endif

/// 127.0.0.1:`port` (0: any port, for `bind`).
public func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    return address
}

/// Binds the TCP socket `fd` to 127.0.0.1 on a port the kernel picks; returns that port, or
/// nil when `bind` or `getsockname` fails.
public func bindLoopback(_ fd: Int32) -> Int? {
    var address = loopbackAddress(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
}

/// Connects the TCP socket `fd` to 127.0.0.1:`port` (blocking); whether it succeeded.
public func connectLoopback(_ fd: Int32, port: Int) -> Bool {
    var address = loopbackAddress(port: port)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

/// A free TCP port on 127.0.0.1, below the kernel's ephemeral range (32768–60999 by default,
/// `ip_local_port_range`): a port that `bind` to port 0 picks is also what the kernel gives the
/// next outgoing connection of any test running beside, which then holds it when the server
/// this port was chosen for binds ("Address already in use"). A random port in 20000–32767 is
/// tried until one binds (and is closed again); only another test drawing the same port in the
/// same instant can take it.
public func freeLoopbackPort() throws -> Int {
    for _ in 0..<200 {
        let port = Int.random(in: 20000...32767)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket failed") }
        defer { close(fd) }
        var address = loopbackAddress(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        if bound { return port }
    }
    throw HarnessError("no free port on 127.0.0.1 in 20000-32767 after 200 tries")
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
public func acceptsConnections(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return connectLoopback(fd, port: port)
}

/// The Unix socket address of `path` (cut to what `sun_path` holds, NUL-terminated).
public func unixAddress(_ path: String) -> sockaddr_un {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (i, byte) in bytes.prefix(raw.count - 1).enumerated() { raw[i] = byte }
    }
    return address
}

/// Binds the Unix socket `fd` to `path`; whether it succeeded.
public func bindUnix(_ fd: Int32, path: String) -> Bool {
    var address = unixAddress(path)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
    }
}

/// Connects the Unix socket `fd` to `path` (blocking); whether it succeeded.
public func connectUnix(_ fd: Int32, path: String) -> Bool {
    var address = unixAddress(path)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
    }
}
