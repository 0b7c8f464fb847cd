package jail

import "maps"

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

// SignInRules are the sign-in files jail knows, read from the CLIs'
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
var SignInRules = []SignInRule{{
	Profile: "claude", Rel: ".claude/.credentials.json", Format: "claude",
	Tokens: []SignInToken{
		{Path: []string{"claudeAiOauth", "accessToken"}, Field: "access_token", Name: "CLAUDE_OAUTH_ACCESS_TOKEN",
			Hosts: claudeOAuthHosts, Inject: []string{"header:Authorization"}},
		{Path: []string{"claudeAiOauth", "refreshToken"}, Field: "refresh_token", Name: "CLAUDE_OAUTH_REFRESH_TOKEN",
			Hosts: []string{"platform.claude.com"}, Inject: []string{"body"}},
	},
	EndpointHost: "platform.claude.com", EndpointPath: "/v1/oauth/token",
	// API_KEY_URL: a POST with the access token, answered {"raw_key"}.
	Issued: []issuedToken{{Host: "api.anthropic.com", Path: "/api/oauth/claude_cli/create_api_key",
		Token: SignInToken{Field: "raw_key", Name: "CLAUDE_OAUTH_API_KEY", Hosts: claudeOAuthHosts, Inject: []string{"header:x-api-key", "header:Authorization"}}}},
}, {
	Profile: "codex", Rel: ".codex/auth.json", Format: "codex",
	Tokens: []SignInToken{
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
	Tokens: []SignInToken{
		{Path: []string{"access_token"}, Field: "access_token", Name: "GEMINI_OAUTH_ACCESS_TOKEN",
			Hosts: geminiAccessHosts, Inject: []string{"header:Authorization"}},
		{Path: []string{"refresh_token"}, Field: "refresh_token", Name: "GEMINI_OAUTH_REFRESH_TOKEN",
			Hosts: []string{googleOAuthHost}, Inject: []string{"body"}},
		{Path: []string{"id_token"}, Field: "id_token", Name: "GEMINI_OAUTH_ID_TOKEN",
			Hosts: []string{googleOAuthHost}, Inject: []string{"body"}},
	},
	EndpointHost: googleOAuthHost, EndpointPath: "/token",
}, {
	Profile: "opencode", Rel: ".local/share/opencode/auth.json", Format: "opencode",
	Tokens: []SignInToken{
		{Path: []string{"*", "key"}, Type: "api", Name: "OPENCODE_AUTH_KEY"},
		{Path: []string{"*", "access"}, Type: "oauth", Field: "access_token", Name: "OPENCODE_AUTH_ACCESS"},
		{Path: []string{"*", "refresh"}, Type: "oauth", Field: "refresh_token", Name: "OPENCODE_AUTH_REFRESH"},
		{Path: []string{"*", "token"}, Type: "wellknown", Name: "OPENCODE_AUTH_TOKEN"},
	},
	Providers: opencodeProviders,
}, {
	Profile: "pi", Rel: ".pi/agent/auth.json", Format: "pi",
	Tokens: []SignInToken{
		{Path: []string{"*", "key"}, Type: "api_key", Name: "PI_AUTH_KEY"},
		{Path: []string{"*", "access"}, Type: "oauth", Field: "access_token", Name: "PI_AUTH_ACCESS"},
		{Path: []string{"*", "refresh"}, Type: "oauth", Field: "refresh_token", Name: "PI_AUTH_REFRESH"},
	},
	Providers: piProviders,
}, {
	// Amp (@ampcode/cli's compiled binary, its file secrets storage, the
	// default) keeps {"NAME@URL": "value"} in ~/.local/share/amp/secrets.json,
	// "apiKey@https://ampcode.com/" the key it sends as "Authorization:
	// Bearer" to that URL; no refresh. A secret for another name or URL is
	// bound nowhere.
	// Amp reads a missing file as {} and fails on an empty one.
	Profile: "amp", Rel: ".local/share/amp/secrets.json", Format: "amp", Missing: "{}\n",
	Tokens:    []SignInToken{{Path: []string{"*"}, Name: "AMP_SECRET"}},
	Providers: map[string]SignInProvider{ampAPIKey: {Hosts: []string{"ampcode.com"}, Inject: []string{"header:Authorization"}}},
}, {
	// GitHub Copilot CLI keeps, where no keychain is reachable (never
	// inside the jail), its GitHub token in plain text in
	// ~/.copilot/config.json, JSON with comments, under copilotTokens
	// (its native runtime, prebuilds/…/runtime.node, names the key; the
	// layout under it is its code's alone): every string under that key,
	// and every value of a known credential shape anywhere in the file,
	// becomes a placeholder sent to the GitHub and Copilot APIs only, where
	// the CLI sends its token as Authorization. No refresh: the token is a
	// GitHub OAuth token.
	Profile: "copilot", Rel: ".copilot/config.json", Format: "copilot",
	Tokens: []SignInToken{
		{Path: []string{"copilotTokens", "**"}, Name: "COPILOT_CONFIG_TOKEN", Hosts: CopilotHosts, Inject: []string{"header:Authorization"}},
		{Path: []string{"**"}, Shaped: true, Name: "COPILOT_CONFIG_SECRET", Hosts: CopilotHosts, Inject: []string{"header:Authorization"}},
	},
}}

// CopilotHosts are where Copilot CLI sends its GitHub token.
var CopilotHosts = []string{"api.github.com", "*.githubcopilot.com"}

// ampAPIKey is the key of Amp's API key for its default server in its
// secrets file.
const ampAPIKey = "apiKey@https://ampcode.com/"

// apiKeyProviders are the API hosts of the providers OpenCode and Pi
// both know by the same id, and the header their SDKs send the key in:
// x-api-key (Anthropic), x-goog-api-key (Google), else Authorization.
var apiKeyProviders = map[string]SignInProvider{
	"anthropic":  {Hosts: []string{"api.anthropic.com"}, Inject: []string{"header:x-api-key", "header:Authorization"}},
	"openai":     {Hosts: []string{"api.openai.com"}, Inject: []string{"header:Authorization"}},
	"google":     {Hosts: []string{"generativelanguage.googleapis.com"}, Inject: []string{"header:x-goog-api-key"}},
	"openrouter": {Hosts: []string{"openrouter.ai"}, Inject: []string{"header:Authorization"}},
	"groq":       {Hosts: []string{"api.groq.com"}, Inject: []string{"header:Authorization"}},
	"mistral":    {Hosts: []string{"api.mistral.ai"}, Inject: []string{"header:Authorization"}},
	"xai":        {Hosts: []string{"api.x.ai"}, Inject: []string{"header:Authorization"}},
	"deepseek":   {Hosts: []string{"api.deepseek.com"}, Inject: []string{"header:Authorization"}},
}

// opencodeProviders are where OpenCode's auth.json entries go, by
// provider id. OpenCode (its compiled binary, opencode-ai) keeps
// {"PROVIDER": {"type": "api", "key"} | {"type": "oauth", "refresh",
// "access", "expires" (ms), "accountId"?} | {"type": "wellknown", "key"
// (a variable's name), "token"}} in $XDG_DATA_HOME/opencode/auth.json.
// Its built-in ChatGPT sign-in ("openai", type oauth) sends the access
// token as "Authorization: Bearer" to chatgpt.com/backend-api/codex and
// refreshes with a form POST of grant_type=refresh_token, refresh_token
// and client_id to https://auth.openai.com/oauth/token, saving
// {"refresh": refresh_token, "access": access_token, "expires": now +
// (expires_in or 3600) s}. OpenCode itself signs in to no other provider
// by OAuth (its plugins do, with code of their own): their refresh
// tokens go nowhere. "opencode" is its own gateway, opencode.ai.
var opencodeProviders = withProviders(apiKeyProviders, map[string]SignInProvider{
	"openai": {Hosts: []string{"api.openai.com"}, Inject: []string{"header:Authorization"},
		AccessHosts: codexAccessHosts, AccessInject: []string{"header:Authorization"},
		EndpointHost: codexAuthHost, EndpointPath: "/oauth/token"},
	"opencode": {Hosts: []string{"opencode.ai"}, Inject: []string{"header:Authorization"}},
})

// piProviders are where Pi's auth.json entries go, by provider id. Pi
// (@mariozechner/pi-coding-agent, core/auth-storage.js) keeps
// {"PROVIDER": {"type": "api_key", "key"} | {"type": "oauth", "refresh",
// "access", "expires" (ms), ...}} in ~/.pi/agent/auth.json; a key that
// starts with "!" is a command whose output is the key, another that
// names a variable is that variable's value (core/resolve-config-value.js):
// neither is a secret, both are left as they are. Its OAuth sign-ins
// (@mariozechner/pi-ai, utils/oauth): "anthropic" sends the access token
// (sk-ant-oat…) as "Authorization: Bearer" to api.anthropic.com and
// refreshes with a JSON POST of {"grant_type": "refresh_token",
// "client_id", "refresh_token"} to https://platform.claude.com/v1/oauth/token;
// "openai-codex" sends it to chatgpt.com and refreshes at
// https://auth.openai.com/oauth/token; both answer {"access_token",
// "refresh_token", "expires_in" (s)}. Its GitHub Copilot sign-in trades
// its GitHub token at no OAuth token endpoint: its tokens go nowhere.
var piProviders = withProviders(apiKeyProviders, map[string]SignInProvider{
	"anthropic": {Hosts: claudeOAuthHosts, Inject: []string{"header:x-api-key", "header:Authorization"},
		EndpointHost: "platform.claude.com", EndpointPath: "/v1/oauth/token"},
	"openai-codex": {AccessHosts: codexAccessHosts, AccessInject: []string{"header:Authorization"},
		EndpointHost: codexAuthHost, EndpointPath: "/oauth/token"},
})

// withProviders is base with more's entries added or replacing base's.
func withProviders(base, more map[string]SignInProvider) map[string]SignInProvider {
	out := maps.Clone(base)
	maps.Copy(out, more)
	return out
}
