import AdvertisementCodec
import BinaryCoding
import Testing

@Suite struct AESTests {
    private func hex(_ s: String) -> [UInt8] { try! Hex.decode(s.replacing(" ", with: "")) }

    /// FIPS-197 Appendix B (the cipher example) and Appendix C.1 (AES-128).
    @Test(arguments: [
        ("2b7e151628aed2a6abf7158809cf4f3c", "3243f6a8885a308d313198a2e0370734", "3925841d02dc09fbdc118597196a0b32"),
        ("000102030405060708090a0b0c0d0e0f", "00112233445566778899aabbccddeeff", "69c4e0d86a7b0430d8cdb78070b4c55a"),
    ])
    func fips197(key: String, plaintext: String, ciphertext: String) throws {
        let aes = try AES128(key: hex(key))
        #expect(aes.encrypt(hex(plaintext)) == hex(ciphertext))
    }

    @Test func aKeyIs16Bytes() {
        #expect(throws: AdvertisementError.malformed("an AES-128 key is 16 bytes, this one has 15")) {
            try AES128(key: [UInt8](repeating: 0, count: 15))
        }
    }

    /// RFC 3610 §8, packet vector #1: 13-byte nonce, 8 bytes of associated data, an 8-byte tag.
    @Test func rfc3610PacketVector1() throws {
        let key = try AES128(key: hex("C0C1C2C3C4C5C6C7C8C9CACBCCCDCECF"))
        let nonce = hex("00000003020100A0A1A2A3A4A5")
        let header = hex("0001020304050607")
        let payload = hex("08090A0B0C0D0E0F101112131415161718191A1B1C1D1E")
        let sealed = try AESCCM.seal(payload, key: key, nonce: nonce, associatedData: header, tagLength: 8)
        #expect(sealed.ciphertext == hex("588C979A61C663D2F066D0C2C0F989806D5F6B61DAC384"))
        #expect(sealed.tag == hex("17E8D12CFDF926E0"))
        let opened = try AESCCM.open(sealed.ciphertext, tag: sealed.tag, key: key, nonce: nonce, associatedData: header)
        #expect(opened == payload)
    }

    @Test func aFlippedBitOrAWrongKeyDoesNotAuthenticate() throws {
        let key = try AES128(key: hex("231d39c1d7cc1ab1aee224cd096db932"))
        let nonce = hex("5448e68f80a5d2fc4133221100")
        let sealed = try AESCCM.seal(hex("02ca0903bf13"), key: key, nonce: nonce)
        for bit in 0..<(sealed.ciphertext.count * 8) {
            var altered = sealed.ciphertext
            altered[bit / 8] ^= 1 << (bit % 8)
            #expect(throws: AdvertisementError.authenticationFailed) {
                try AESCCM.open(altered, tag: sealed.tag, key: key, nonce: nonce)
            }
        }
        var tag = sealed.tag
        tag[3] ^= 0x80
        #expect(throws: AdvertisementError.authenticationFailed) { try AESCCM.open(sealed.ciphertext, tag: tag, key: key, nonce: nonce) }
        var nonce2 = nonce
        nonce2[12] ^= 1
        #expect(throws: AdvertisementError.authenticationFailed) { try AESCCM.open(sealed.ciphertext, tag: sealed.tag, key: key, nonce: nonce2) }
        let wrong = try AES128(key: hex("231d39c1d7cc1ab1aee224cd096db933"))
        #expect(throws: AdvertisementError.authenticationFailed) { try AESCCM.open(sealed.ciphertext, tag: sealed.tag, key: wrong, nonce: nonce) }
        #expect(try AESCCM.open(sealed.ciphertext, tag: sealed.tag, key: key, nonce: nonce) == hex("02ca0903bf13"))
    }
}
