import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A crash leaves a trace on standard error (the journal, `docker logs`): the release binary is
/// linked with the static Swift runtime, which has no backtracer unless `SWIFT_BACKTRACE` names a
/// `swift-backtrace` (docs/configuration.md, "When the bridge crashes"), so without this a trap
/// (an overflow, an index out of range: SIGILL on x86-64, SIGTRAP on arm64) ends the process
/// without a word.
///
/// ``install()`` catches SIGILL, SIGTRAP, SIGSEGV, SIGBUS, SIGABRT and SIGFPE (on an alternate
/// stack, so a stack overflow is caught too). The handler only does async-signal-safe things with
/// memory prepared beforehand: it writes, on fd 2, a line naming the signal, the line
/// ``noteMessage(topic:payload:)`` formatted for the last MQTT message received, and the raw
/// backtrace (glibc's `backtrace_symbols_fd`: `binary(+offset)` lines, which
/// `llvm-symbolizer --obj=<binary> <offset>` resolves), then puts back the handler that was
/// there before (the Swift runtime's backtracer when it is on, else the default) and raises the
/// signal again, so the process still dies of it (status 128 + signal, a core dump if enabled).
public enum CrashTrace {
    private typealias Backtrace = @convention(c) (UnsafeMutablePointer<UnsafeMutableRawPointer?>?, Int32) -> Int32
    private typealias BacktraceSymbolsFD = @convention(c) (UnsafePointer<UnsafeMutableRawPointer?>?, Int32, Int32) -> Void

    static let signals: [Int32] = [SIGILL, SIGTRAP, SIGSEGV, SIGBUS, SIGABRT, SIGFPE]
    static let messageCapacity = 512
    static let frameCapacity = 64

    /// Everything the handler touches, made once by ``install()`` (never freed).
    private struct Prepared {
        let previous: UnsafeMutablePointer<sigaction>  // indexed by signal number
        let message: UnsafeMutablePointer<UInt8>
        let frames: UnsafeMutablePointer<UnsafeMutableRawPointer?>
        let backtrace: Backtrace?
        let symbols: BacktraceSymbolsFD?
    }

    nonisolated(unsafe) private static var prepared: Prepared?
    /// The length of the line in `prepared.message` (0: no message yet).
    private static let messageLength = Atomic<Int>(0)
    private static let installed = Mutex(false)
    /// Serialises the writers of the message line (the handler reads it without a lock: at
    /// worst a line being rewritten at the instant of the crash comes out mixed).
    private static let writer = Mutex(())

    /// Installs the handlers (once; later calls do nothing). Call it early in `main`.
    public static func install() {
        let first = installed.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        let handle = dlopen(nil, RTLD_NOW)
        let backtrace = dlsym(handle, "backtrace").map { unsafeBitCast($0, to: Backtrace.self) }
        let symbols = dlsym(handle, "backtrace_symbols_fd").map { unsafeBitCast($0, to: BacktraceSymbolsFD.self) }
        let frames = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: frameCapacity)
        // The first backtrace() loads the unwinder (it may allocate): not in the handler.
        _ = backtrace?(frames, Int32(frameCapacity))
        let previous = UnsafeMutablePointer<sigaction>.allocate(capacity: 65)
        previous.initialize(repeating: sigaction(), count: 65)
        prepared = Prepared(previous: previous, message: .allocate(capacity: messageCapacity), frames: frames,
                            backtrace: backtrace, symbols: symbols)
        // An alternate stack, so that a stack overflow's SIGSEGV can still be reported.
        let size = 64 * 1024
        var stack = stack_t()
        stack.ss_sp = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        stack.ss_size = size
        stack.ss_flags = 0
        sigaltstack(&stack, nil)
        for sig in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { sig in CrashTrace.report(sig) }
            action.sa_flags = Int32(SA_ONSTACK)
            sigemptyset(&action.sa_mask)
            sigaction(sig, &action, previous + Int(sig))
        }
    }

    /// Remembers the message being handled, for the crash line (before each message; the
    /// formatting is done here, not in the handler).
    public static func noteMessage(topic: String, payload: [UInt8]) {
        guard let prepared else { return }
        // Written straight into the prepared buffer (once per message: no array or string made).
        writer.withLock { _ in
            messageLength.store(0, ordering: .sequentiallyConsistent)
            var line = LineWriter(base: prepared.message, capacity: messageCapacity)
            line.append("gatt2mqtt: the last MQTT message received: topic ")
            if topic.utf8.withContiguousStorageIfAvailable({ line.append(UnsafeBufferPointer(rebasing: $0.prefix(200))) }) == nil {
                var topic = topic
                topic.withUTF8 { line.append(UnsafeBufferPointer(rebasing: $0.prefix(200))) }
            }
            line.append(", ")
            line.append(decimal: payload.count)
            line.append(" byte(s): ")
            payload.withUnsafeBufferPointer { line.append(printable: UnsafeBufferPointer(rebasing: $0.prefix(160))) }
            if payload.count > 160 { line.append("…") }
            line.append(byte: UInt8(ascii: "\n"))
            messageLength.store(line.count, ordering: .sequentiallyConsistent)
        }
    }

    /// Appends to a fixed buffer; what does not fit is dropped.
    struct LineWriter {
        let base: UnsafeMutablePointer<UInt8>
        let capacity: Int
        private(set) var count = 0

        init(base: UnsafeMutablePointer<UInt8>, capacity: Int) {
            self.base = base
            self.capacity = capacity
        }

        mutating func append(byte: UInt8) {
            guard count < capacity else { return }
            base[count] = byte
            count += 1
        }

        mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
            let n = min(bytes.count, capacity - count)
            guard n > 0 else { return }
            (base + count).update(from: bytes.baseAddress!, count: n)
            count += n
        }

        /// `bytes` with every byte outside printable ASCII written as `.`.
        mutating func append(printable bytes: UnsafeBufferPointer<UInt8>) {
            let start = count
            append(bytes)
            for i in start..<count where base[i] < 0x20 || base[i] >= 0x7F { base[i] = UInt8(ascii: ".") }
        }

        mutating func append(_ text: StaticString) {
            text.withUTF8Buffer { append($0) }
        }

        /// A non-negative number in decimal (a negative one as its magnitude).
        mutating func append(decimal value: Int) {
            var divisor = 1
            while value.magnitude / UInt(divisor) >= 10 { divisor *= 10 }
            var rest = value.magnitude
            repeat {
                append(byte: UInt8(ascii: "0") + UInt8(rest / UInt(divisor)))
                rest %= UInt(divisor)
                divisor /= 10
            } while divisor > 0
        }
    }

    /// The signal handler's body: async-signal-safe calls only (write, backtrace after its
    /// first call, sigaction, raise).
    private static func report(_ sig: Int32) {
        put("\ngatt2mqtt: fatal signal ")
        put(name(sig))
        put("\n")
        guard let prepared else { return }
        let n = messageLength.load(ordering: .sequentiallyConsistent)
        if n > 0 { _ = write(2, prepared.message, n) }
        if let backtrace = prepared.backtrace, let symbols = prepared.symbols {
            put("gatt2mqtt: backtrace (resolve a `binary(+offset)` line with: llvm-symbolizer --obj=<binary> <offset>):\n")
            let count = backtrace(prepared.frames, Int32(frameCapacity))
            symbols(prepared.frames, count, 2)
        }
        sigaction(sig, prepared.previous + Int(sig), nil)
        raise(sig)
    }

    private static func put(_ s: StaticString) {
        _ = write(2, s.utf8Start, s.utf8CodeUnitCount)
    }

    private static func name(_ sig: Int32) -> StaticString {
        switch sig {
        case SIGILL: return "SIGILL (illegal instruction: a Swift runtime check failed, e.g. an arithmetic overflow, an index out of range, a nil unwrapped, or a fatal error)"
        case SIGTRAP: return "SIGTRAP (a Swift runtime check failed, e.g. an arithmetic overflow, an index out of range, a nil unwrapped, or a fatal error)"
        case SIGSEGV: return "SIGSEGV (invalid memory access, or a stack overflow)"
        case SIGBUS: return "SIGBUS (bus error)"
        case SIGABRT: return "SIGABRT (aborted)"
        case SIGFPE: return "SIGFPE (arithmetic exception)"
        default: return "(unknown)"
        }
    }
}
