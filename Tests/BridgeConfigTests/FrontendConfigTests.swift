import BridgeConfig
import Testing

/// `frontend:` (docs/frontend.md): off unless configured; the environment overrides.
@Suite struct FrontendConfigTests {
    @Test func offByDefaultOnWhenConfigured() throws {
        #expect(try Configuration(yaml: "").frontend == nil)
        #expect(try Configuration(yaml: "frontend: {}").frontend == FrontendSettings(host: "127.0.0.1", port: 8080))
        let c = try Configuration(yaml: "frontend:\n  listen: 0.0.0.0:8081\n  auth_token_file: /etc/gatt2mqtt/token\n")
        #expect(c.frontend == FrontendSettings(host: "0.0.0.0", port: 8081, authTokenFile: "/etc/gatt2mqtt/token"))
        #expect(c.frontend?.listen == "0.0.0.0:8081")
        #expect(try Configuration(yaml: "frontend: {listen: \"[::1]:8080\"}").frontend?.listen == "[::1]:8080")
    }

    @Test func errorsNameTheKey() {
        #expect(throws: ConfigError(path: "frontend.listen", line: 1,
                                    message: "'8080' is not HOST:PORT with an IP address and a port 1…65535 (e.g. 127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080)")) {
            try Configuration(yaml: "frontend: {listen: \"8080\"}")
        }
        #expect(throws: ConfigError.self) { try Configuration(yaml: "frontend: {token: abc}") }
        #expect(throws: ConfigError.self) { try Configuration(yaml: "frontend: {auth_token_file: \"\"}") }
    }

    /// GATT2MQTT_FRONTEND_LISTEN turns it on (or moves it); empty turns it off.
    @Test func fromTheEnvironment() throws {
        let on = try Configuration(yaml: "", environment: ["GATT2MQTT_FRONTEND_LISTEN": "127.0.0.1:9000",
                                                          "GATT2MQTT_FRONTEND_AUTH_TOKEN_FILE": "/run/token"])
        #expect(on.frontend == FrontendSettings(host: "127.0.0.1", port: 9000, authTokenFile: "/run/token"))
        let off = try Configuration(yaml: "frontend: {listen: \"127.0.0.1:8080\"}", environment: ["GATT2MQTT_FRONTEND_LISTEN": ""])
        #expect(off.frontend == nil)
        #expect(throws: ConfigError.self) { try Configuration(yaml: "", environment: ["GATT2MQTT_FRONTEND_LISTEN": "nowhere"]) }
    }
}
