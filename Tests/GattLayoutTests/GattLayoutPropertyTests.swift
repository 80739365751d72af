import BinaryCoding
import GattLayout
import TestSupport
import Testing

/// Round-trip properties on random values and random bytes (seeded, so failures reproduce).
@Suite struct GattLayoutPropertyTests {
    /// A random value for one field of the rich layout, in the form the decoder produces.
    func randomValue(_ type: GattLayout.FieldType, _ rng: inout SeededRandom) -> JSONValue {
        switch type {
        case let .integer(format, numeric):
            let bits = format.byteCount * 8
            var raw = rng.next()
            if bits < 64 { raw &= (UInt64(1) << UInt64(bits)) - 1 }
            if format.isSigned {
                let v = Int64(bitPattern: raw << UInt64(64 - bits)) >> Int64(64 - bits)
                if let name = numeric.enumeration.first(where: { $0.value == v })?.name { return .string(name) }
                if numeric.scale != nil || numeric.offset != nil { return .double(scaled(Double(v), numeric)) }
                return .int(v)
            }
            if numeric.maximum != nil || !numeric.enumeration.isEmpty {
                // Stay within max; sometimes pick a named value.
                if !numeric.enumeration.isEmpty, rng.next() % 2 == 0 {
                    return .string(numeric.enumeration[Int(rng.next() % UInt64(numeric.enumeration.count))].name)
                }
                raw %= min(1000, UInt64(1) << UInt64(min(bits, 63)))
                if numeric.enumeration.contains(where: { $0.value == Int64(raw) }) { raw = 200 }
            }
            if numeric.scale != nil || numeric.offset != nil { return .double(scaled(Double(raw), numeric)) }
            return raw <= UInt64(Int64.max) ? .int(Int64(raw)) : .uint(raw)
        case let .ieee754(byteCount, _, _):
            if byteCount == 4 {
                let f = Float(bitPattern: UInt32(truncatingIfNeeded: rng.next()))
                return f.isFinite ? .double(Double(String(describing: f))!) : .string(f.isNaN ? "NaN" : f > 0 ? "+INFINITY" : "-INFINITY")
            }
            let d = Double(bitPattern: rng.next())
            return d.isFinite ? .double(d) : .string(d.isNaN ? "NaN" : d > 0 ? "+INFINITY" : "-INFINITY")
        case let .medfloat(format, _, _):
            switch IEEE11073Float.decode(UInt32(truncatingIfNeeded: rng.next()), format: format) {
            case let .number(d): return .double(d)
            case let .special(s): return .string(s.rawValue)
            }
        case let .utf8(length):
            let alphabet = Array("abcXYZ09 é€😀")
            var s = ""
            let n = Int(rng.next() % UInt64((length ?? 12) + 1))
            for _ in 0..<n {
                let c = alphabet[Int(rng.next() % UInt64(alphabet.count))]
                if let length, s.utf8.count + String(c).utf8.count > length { break }
                s.append(c)
            }
            return .string(s)
        case let .bytes(length):
            let n = length ?? Int(rng.next() % 8)
            return .string(Hex.encode((0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }))
        case let .structure(members):
            var o = JSONObject()
            for m in members { o[m.name] = randomRepeated(m, &rng) }
            return .object(o)
        case .flags, .pad:
            return .null
        }
    }

    /// The decoder's arithmetic: scales of the form 1/k divide by k (docs/layouts.md, "scale").
    func scaled(_ raw: Double, _ numeric: GattLayout.Numeric) -> Double {
        var v = raw
        if let s = numeric.scale { v = (1 / s).rounded() == 1 / s && 1 / s > 1 ? raw / (1 / s) : raw * s }
        return v + (numeric.offset ?? 0)
    }

    func randomRepeated(_ field: GattLayout.Field, _ rng: inout SeededRandom) -> JSONValue {
        switch field.repetition {
        case .once: return randomValue(field.type, &rng)
        case let .count(n): return .array((0..<n).map { _ in randomValue(field.type, &rng) })
        case .rest: return .array((0..<Int(rng.next() % 5)).map { _ in randomValue(field.type, &rng) })
        }
    }

    /// encode → decode gives back the value, for random values of every field of the rich layout,
    /// with optional fields randomly present or absent.
    @Test func richLayoutValueRoundTrip() throws {
        let l = try layout(richLayoutJSON)
        var rng = SeededRandom(seed: 0x1234_5678)
        for iteration in 0..<2000 {
            var o = JSONObject()
            var seen: Set<String> = []
            for field in l.fields {
                if case let .flags(flags) = field.type {
                    for bit in flags.bits where bit.presenceIndex == nil {
                        if bit.width == 1 {
                            o[bit.name] = .bool(rng.next() % 2 == 0)
                        } else if let e = bit.enumeration.first, rng.next() % 3 == 0 {
                            o[bit.name] = .string(e.name)
                        } else {
                            let v = Int64(rng.next() % (UInt64(1) << UInt64(bit.width)))
                            o[bit.name] = bit.enumeration.first(where: { $0.value == v }).map { .string($0.name) } ?? .int(v)
                        }
                    }
                    continue
                }
                if case .pad = field.type { continue }
                if seen.contains(field.name) { continue }
                let alternatives = l.fields.filter { $0.name == field.name }.count
                if field.condition != nil, alternatives == 1, rng.next() % 2 == 0 { seen.insert(field.name); continue }
                // For alternatives (counter: u8 or u32), draw from the wider one.
                let wider = l.fields.last(where: { $0.name == field.name }) ?? field
                o[field.name] = randomRepeated(wider, &rng)
                seen.insert(field.name)
            }
            let value = JSONValue.object(o)
            let encoded = try l.encode(value)
            let decoded = try l.decode(encoded)
            #expect(decoded == value, "iteration \(iteration): \(value.jsonText)")
            if decoded != value { break }
        }
    }

    /// Random bytes either decode or throw a GattLayoutError (never crash); what decodes encodes
    /// again, and that encoding decodes to the same value.
    @Test(arguments: ["heart_rate_measurement", "temperature_measurement", "battery_level", "rich"])
    func randomBytesDecodeEncodeDecode(_ name: String) throws {
        let l = name == "rich" ? try layout(richLayoutJSON) : try GattLayout.builtin(named: name)
        var rng = SeededRandom(seed: UInt64(name.utf8.count))
        var decodedCount = 0
        for _ in 0..<5000 {
            let n = Int(rng.next() % 80)
            let input = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            let value: JSONValue
            do throws(GattLayoutError) { value = try l.decode(input) } catch { continue }
            decodedCount += 1
            let again = try l.decode(try l.encode(value))
            #expect(again == value, "input \(Hex.encode(input))")
        }
        #expect(decodedCount > 0)
    }

    /// Integer-only layouts are canonical: bytes → JSON → bytes is the identity.
    @Test func integerLayoutBytesRoundTrip() throws {
        let l = try layout(#"{"fields":[{"type":"flags","bits":[{"name":"p","bit":0},{"name":"f","bit":1},{"name":"m","bit":2,"width":6}]},{"name":"a","type":"i16"},{"name":"b","type":"u32","endian":"big","present_if":"p"},{"name":"c","type":"u8","enum":{"1":"one"}},{"name":"d","type":"i8","repeat":"rest"}]}"#)
        var rng = SeededRandom(seed: 7)
        for _ in 0..<3000 {
            var input: [UInt8] = [UInt8(truncatingIfNeeded: rng.next())]
            let size = 3 + (input[0] & 1 == 1 ? 4 : 0) + Int(rng.next() % 6)
            input += (0..<size).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            let value = try l.decode(input)
            #expect(try l.encode(value) == input, "input \(Hex.encode(input))")
        }
    }
}
