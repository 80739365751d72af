import AdvertisementCodec
import BinaryCoding
import GattLayout
import TestSupport
import Testing

/// Random bytes into every built-in layout format (they return or throw, never trap), and the
/// encoder's round trip: a reading decoded from random bytes of a variant's length encodes to
/// bytes that decode to the same reading (seeded, so failures reproduce).
@Suite struct LayoutFormatPropertyTests {
    @Test(arguments: LayoutFormat.builtinDefinitions.map(\.name))
    func randomBytesReturnOrThrow(_ name: String) throws {
        let format = try builtinLayout(name)
        var rng = SeededRandom(seed: 0x5EED_0000 &+ UInt64(name.utf8.count))
        var decoded = 0, refused = 0, ignored = 0
        for i in 0..<3000 {
            let variant = i % format.variants.count
            // Lengths around the variants' own, sometimes the right one with the right prefix.
            let match = format.variants[variant].match
            var bytes = (0..<Int(rng.next() % 28)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if i % 2 == 0, let length = match.length {
                bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                bytes.replaceSubrange(0..<match.prefix.count, with: match.prefix)
            }
            do {
                if try format.decode(packet(for: format, variant: variant, bytes), key: nil) != nil { decoded += 1 } else { ignored += 1 }
            } catch {
                refused += 1
            }
        }
        #expect(decoded > 1000, "decoded \(decoded), refused \(refused), not matched \(ignored)")
        #expect(ignored > 0)
    }

    @Test(arguments: LayoutFormat.builtinDefinitions.map(\.name))
    func readingsEncodeAndDecodeBack(_ name: String) throws {
        let format = try builtinLayout(name)
        var rng = SeededRandom(seed: 0xC0DE &+ UInt64(name.utf8.count))
        for i in 0..<2000 {
            let variant = i % format.variants.count
            let match = format.variants[variant].match
            var bytes = (0..<(match.length ?? 8)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            bytes.replaceSubrange(0..<match.prefix.count, with: match.prefix)
            guard let reading = try format.decode(packet(for: format, variant: variant, bytes), key: nil) else {
                Issue.record("\(name): \(Hex.encode(bytes)) did not match")
                return
            }
            let encoded = try format.encode(reading, variant: variant)
            let again = try format.decode(packet(for: format, variant: variant, encoded), key: nil)
            #expect(again == reading, "\(name): \(Hex.encode(bytes)) → \(reading.values) → \(Hex.encode(encoded))")
            if again != reading { return }
        }
    }
}
