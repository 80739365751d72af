// fuzz-modules: InternalCollectionsUtilities OrderedCollections BinaryCoding GattLayout
// fuzz-sources: Tests/GattLayoutTests/RichLayout.swift
// GattLayout fuzz target: arbitrary bytes are decoded with every built-in and a rich custom layout
// (richLayoutJSON, shared with Tests/GattLayoutTests). Each decode either succeeds or throws a
// GattLayoutError; what decodes must encode again and decode to the same value. When the input is
// JSON, it is also tried as a layout definition, and a layout that parses is exercised the same way.
import BinaryCoding
import GattLayout

let layouts: [GattLayout] = {
    var all = BuiltinLayout.allCases.compactMap { try? $0.layout() }
    if let rich = try? GattLayout(json: JSONValue(parsing: richLayoutJSON)) { all.append(rich) }
    if all.count != BuiltinLayout.allCases.count + 1 { fatalError("a fuzz layout does not parse") }
    return all
}()

func exercise(_ layout: GattLayout, _ bytes: [UInt8]) {
    let value: JSONValue
    do throws(GattLayoutError) { value = try layout.decode(bytes) } catch { return }
    let encoded: [UInt8]
    do throws(GattLayoutError) { encoded = try layout.encode(value) } catch {
        fatalError("decoded value does not encode: \(error) for \(value.jsonText)")
    }
    do throws(GattLayoutError) {
        let again = try layout.decode(encoded)
        if again != value { fatalError("round trip changed \(value.jsonText) to \(again.jsonText)") }
    } catch {
        fatalError("re-encoded value does not decode: \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for layout in layouts { exercise(layout, bytes) }
    if let json = try? JSONValue(parsing: bytes), let custom = try? GattLayout(json: json) {
        exercise(custom, bytes)
        exercise(custom, Array(bytes.reversed()))
    }
    return 0
}
