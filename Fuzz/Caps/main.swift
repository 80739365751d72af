// fuzz-modules: InternalCollectionsUtilities OrderedCollections BinaryCoding CapsCodec
// Caps object decoder fuzz target: any bytes either decode or throw CapsError; what decodes
// must re-encode, decode to the same value, and survive the canonical JSON form unchanged.
import BinaryCoding
import CapsCodec

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let whole: Caps
    do {
        whole = try Caps(decoding: bytes)
    } catch {
        // The stream form must agree: an input the whole-buffer parse calls truncated is
        // incomplete for the stream parse too.
        if error.isNeedMoreData, let r = try? Caps.decodePrefix(of: bytes[...], sizeLimit: Int(UInt32.max)) {
            fatalError("stream parse completed a truncated object of \(r.consumed) bytes")
        }
        return 0
    }
    guard let again = try? whole.encoded() else { fatalError("decoded value does not encode") }
    guard let back = try? Caps(decoding: again), back == whole else { fatalError("re-encoded value decodes differently") }
    guard let prefix = try? Caps.decodePrefix(of: bytes[...], sizeLimit: Int(UInt32.max)),
          prefix.caps == whole, prefix.consumed == bytes.count else { fatalError("stream parse disagrees with the whole parse") }
    guard let fromJSON = try? Caps(jsonText: whole.typedJSON.jsonText), fromJSON == whole else {
        fatalError("canonical JSON does not round-trip")
    }
    _ = try? CXRPacket(caps: whole).json
    return 0
}
