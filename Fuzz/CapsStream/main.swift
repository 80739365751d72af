// fuzz-modules: InternalCollectionsUtilities OrderedCollections BinaryCoding CapsCodec
// Stream reader + CXR packet decoder fuzz target. The first input byte picks a chunk size; the
// rest is fed to a CapsStreamReader in chunks of that size. The objects it yields must be the
// ones a byte-at-a-time reader yields, and each must either be rejected as a CXR packet or
// decode to one that re-encodes and decodes to the same packet.
import BinaryCoding
import CapsCodec

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let chunk = Int(data[0]) + 1
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    var chunked = CapsStreamReader(sizeLimit: 1 << 16)
    var drip = CapsStreamReader(sizeLimit: 1 << 16)
    var a = [Caps](), b = [Caps]()
    var errorA: CapsError?, errorB: CapsError?
    var i = 0
    while i < bytes.count && errorA == nil {
        let end = min(bytes.count, i + chunk)
        do { a += try chunked.feed(bytes[i..<end]) } catch { errorA = error }
        i = end
    }
    for byte in bytes where errorB == nil {
        do { b += try drip.feed(CollectionOfOne(byte)) } catch { errorB = error }
    }
    // feed() hands back complete objects before throwing; a pending error is sticky.
    errorA = errorA ?? chunked.failure
    errorB = errorB ?? drip.failure
    if a != b || errorA != errorB { fatalError("chunked and byte-by-byte readers disagree") }
    for caps in a {
        guard let packet = try? CXRPacket(caps: caps) else { continue }
        _ = packet.json
        guard let encoded = try? packet.encoded(), let back = try? CXRPacket(decoding: encoded), back == packet else {
            fatalError("CXR packet does not round-trip")
        }
    }
    return 0
}
