/// Hands out CXR request ids for one link (spec rokid-caps.md §5.4: RESPONSE packets are
/// matched to their REQUEST by this id). Starts at 1, wraps after `UInt32.max` and never
/// returns 0, which CXRControl requests use by convention (§6). A value type: keep one per
/// link/session, never a global.
public struct CXRRequestCounter: Sendable, Equatable {
    private var last: UInt32

    /// - Parameter after: the id before the first one handed out (default 0, so the first is 1).
    public init(after: UInt32 = 0) { last = after }

    /// The next request id.
    public mutating func next() -> UInt32 {
        last = last == .max ? 1 : last + 1
        return last
    }
}

extension CXRCommand {
    /// Takes the next id from `counter` and returns the REQUEST bytes with that id: what the
    /// bridge sends, and the id to match the RESPONSE against.
    public func encoded(using counter: inout CXRRequestCounter) throws(CapsError) -> (bytes: [UInt8], requestID: UInt32) {
        let id = counter.next()
        return (try encoded(requestID: id), id)
    }
}
