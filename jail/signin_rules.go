package jail

// claudeOAuthHosts are where Claude Code sends its access token.
var claudeOAuthHosts = []string{"api.anthropic.com"}

// codexAccessHosts are where Codex sends its ChatGPT access token: the
// ChatGPT backend (chatgpt.com/backend-api/codex).
var codexAccessHosts = []string{"chatgpt.com"}

// codexAuthHost is OpenAI's sign-in host: its /oauth/token takes the
// refresh token (and, at sign-in, the id token for an API key).
const codexAuthHost = "auth.openai.com"

// googleOAuthHost is Google's OAuth 2 host: the token endpoint (/token)
// and tokeninfo, which Gemini CLI asks with its access token.
const googleOAuthHost = "oauth2.googleapis.com"

// geminiAccessHosts are where Gemini CLI sends its access token: Code
// Assist, the token's own tokeninfo and the userinfo it caches the
// account's address from.
var geminiAccessHosts = []string{"cloudcode-pa.googleapis.com", googleOAuthHost, "www.googleapis.com"}

// signInRules are the sign-in files jail knows, read from the CLIs'
// code.
//
// Claude Code keeps {"claudeAiOauth": {"accessToken", "refreshToken",
// "expiresAt" (ms), "scopes", ...}} in ~/.claude/.credentials.json (mode
// 0600), sends the access token as "Authorization: Bearer" (to the API,
// and to its API_KEY_URL, which answers a new API key as raw_key), and
// refreshes with a JSON POST of {"grant_type": "refresh_token",
// "refresh_token", "client_id", "scope"} to its OAuth TOKEN_URL, which
// answers {"access_token", "refresh_token", "expires_in" (s), "scope"}.
//
// Codex (signed in with ChatGPT) keeps {"OPENAI_API_KEY", "tokens":
// {"id_token", "access_token", "refresh_token", "account_id"},
// "last_refresh"} in ~/.codex/auth.json; it sends the access token as
// "Authorization: Bearer" to the ChatGPT backend and refreshes with a
// JSON POST of {"client_id", "grant_type": "refresh_token",
// "refresh_token", "scope"} to https://auth.openai.com/oauth/token, which
// answers {"id_token", "access_token", "refresh_token"}. Its id_token and
// access_token are JWTs whose claims Codex reads (the plan type, the
// account, the expiry): see signInPlaceholder.
//
// Gemini CLI (signed in with Google) keeps google-auth-library's
// credentials {"access_token", "refresh_token", "id_token", "scope",
// "token_type", "expiry_date" (ms)} in ~/.gemini/oauth_creds.json; the
// library refreshes with a form-encoded POST of refresh_token,
// client_id, client_secret and grant_type=refresh_token to
// https://oauth2.googleapis.com/token, which answers {"access_token",
// "expires_in" (s), "scope", "token_type", "id_token"} (no new refresh
// token).
var signInRules = []signInRule{{
	Profile: "claude", Rel: ".claude/.credentials.json", Format: "claude",
	Tokens: []signInToken{
		{Path: []string{"claudeAiOauth", "accessToken"}, Field: "access_token", Name: "CLAUDE_OAUTH_ACCESS_TOKEN",
			Hosts: claudeOAuthHosts, Inject: []string{"header:Authorization"}},
		{Path: []string{"claudeAiOauth", "refreshToken"}, Field: "refresh_token", Name: "CLAUDE_OAUTH_REFRESH_TOKEN",
			Hosts: []string{"platform.claude.com"}, Inject: []string{"body"}},
	},
	EndpointHost: "platform.claude.com", EndpointPath: "/v1/oauth/token",
	// API_KEY_URL: a POST with the access token, answered {"raw_key"}.
	Issued: []issuedToken{{Host: "api.anthropic.com", Path: "/api/oauth/claude_cli/create_api_key",
		Token: signInToken{Field: "raw_key", Name: "CLAUDE_OAUTH_API_KEY", Hosts: claudeOAuthHosts, Inject: []string{"header:x-api-key", "header:Authorization"}}}},
}, {
	Profile: "codex", Rel: ".codex/auth.json", Format: "codex",
	Tokens: []signInToken{
		{Path: []string{"tokens", "access_token"}, Field: "access_token", Name: "CODEX_OAUTH_ACCESS_TOKEN",
			Hosts: codexAccessHosts, Inject: []string{"header:Authorization"}},
		{Path: []string{"tokens", "refresh_token"}, Field: "refresh_token", Name: "CODEX_OAUTH_REFRESH_TOKEN",
			Hosts: []string{codexAuthHost}, Inject: []string{"body"}},
		{Path: []string{"tokens", "id_token"}, Field: "id_token", Name: "CODEX_OAUTH_ID_TOKEN",
			Hosts: []string{codexAuthHost}, Inject: []string{"body"}},
		// The API key the sign-in exchanged the id token for; no refresh
		// answer carries one.
		{Path: []string{"OPENAI_API_KEY"}, Name: "CODEX_AUTH_OPENAI_API_KEY",
			Hosts: []string{"api.openai.com"}, Inject: []string{"header:Authorization"}},
	},
	EndpointHost: codexAuthHost, EndpointPath: "/oauth/token",
}, {
	Profile: "gemini", Rel: ".gemini/oauth_creds.json", Format: "gemini",
	Tokens: []signInToken{
		{Path: []string{"access_token"}, Field: "access_token", Name: "GEMINI_OAUTH_ACCESS_TOKEN",
			Hosts: geminiAccessHosts, Inject: []string{"header:Authorization"}},
		{Path: []string{"refresh_token"}, Field: "refresh_token", Name: "GEMINI_OAUTH_REFRESH_TOKEN",
			Hosts: []string{googleOAuthHost}, Inject: []string{"body"}},
		{Path: []string{"id_token"}, Field: "id_token", Name: "GEMINI_OAUTH_ID_TOKEN",
			Hosts: []string{googleOAuthHost}, Inject: []string{"body"}},
	},
	EndpointHost: googleOAuthHost, EndpointPath: "/token",
}}
