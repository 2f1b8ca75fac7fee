package redact

import (
	"encoding/json"
	"net/url"
	"strings"
)

// Shapes is the number of shapes [Plant] knows.
const Shapes = 26

// Plant returns text with secret planted in it in shape number
// shape%Shapes, for the fuzz tests of every place String is applied, and
// the secret as planted (shapes that allow fewer bytes drop the others).
// secret should be made of letters, digits and "._~+/-", as tokens are.
// The JSON shapes return valid JSON.
func Plant(text, secret string, shape int) (planted, as string) {
	if shape < 0 {
		shape = -shape
	}
	word := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return 'x'
	}, secret)
	quote := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			panic("redact: Plant: " + err.Error())
		}
		return string(b)
	}
	switch shape % Shapes {
	case 0:
		return text + " Authorization: Bearer " + secret, secret
	case 1:
		return text + " Authorization: Token " + secret + "\n" + text, secret
	case 2:
		return text + "\r\nProxy-Authorization: " + secret + "\r\n", secret
	case 3:
		return quote(map[string]string{"text": text + "\nAuthorization: Digest username=\"u\", response=\"" + secret + "\"\n" + text}), secret
	case 4:
		return text + " x-api-key: " + secret, secret
	case 5:
		return text + " https://h/p?api_key=" + secret + "&q=" + text, secret
	case 6:
		return text + " /cb?state=1&access_token=" + secret, secret
	case 7:
		return text + " X-Amz-Security-Token: " + secret, secret
	case 8:
		return text + " Authorization: AWS4-HMAC-SHA256 Credential=" + secret + "/20240101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=" + word, secret
	case 9:
		return text + " Credential=" + word + "/20240101/us-east-1/s3/aws4_request, Signature=" + secret, secret
	case 10:
		return text + " sk-ant-api03-" + word + " " + text, word
	case 11:
		return quote(map[string]any{"authorization": "Bearer " + secret, "text": text}), secret
	case 12:
		return quote(map[string]string{"body": text + "\r\nAuthorization: Token " + secret + "\r\n" + text}), secret
	case 13:
		return text + " https://maps/api?key=" + secret, secret
	case 14:
		return text + " token=" + secret, secret
	case 15:
		inner := quote(map[string]string{"body": "GET /\nAuthorization: Bearer " + secret + "\n" + text})
		return quote(map[string]string{"log": inner}), secret
	case 16:
		return quote(map[string]any{"headers": map[string][]string{"X-Api-Key": {secret}}, "text": text}), secret
	case 17:
		return text + ` level=INFO password="` + secret + `" n=1`, secret
	case 18:
		return quote(map[string]string{"url": "https://h/b?sv=1&sig=" + secret + "&q=" + text}), secret
	case 19:
		return quote(map[string]string{"body": "<auth><user>" + text + "</user><password>" + secret + "</password></auth>"}), secret
	case 20:
		return text + "\n[db]\npassword = \"" + secret + "\"\n", secret
	case 21:
		return text + "\ndb:\n  password: |\n    " + secret + "\n", secret
	case 23:
		return text + ` <db user="u" pass` + "\u200b" + `word="` + secret + `"/>`, secret
	case 24:
		return quote(map[string]string{"config": "<add key=\"ApiKey\" value=\"" + secret + "\"/>" + text}), secret
	case 25:
		return text + " api\u200b_key=" + secret, secret
	default:
		return text + " /login?next=%2Fb%3Fx%3D1%26key%3D" + url.QueryEscape(secret) + "%26y%3D2", url.QueryEscape(secret)
	}
}
