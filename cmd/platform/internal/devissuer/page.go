package devissuer

import (
	"bytes"
	"html/template"
	"net/http"
	"net/url"
	"strings"
)

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · opsmcp development sign-in</title>
<style>
body { font: 15px/1.5 system-ui, sans-serif; background: #f4f5f7; color: #1d2330; margin: 0; }
main { max-width: 28rem; margin: 12vh auto; background: #fff; border: 1px solid #d8dce3; border-radius: 8px; padding: 2rem; }
h1 { font-size: 1.3rem; margin: 0 0 .75rem; }
.who { background: #f4f5f7; border-radius: 6px; padding: .75rem 1rem; margin: 1rem 0; }
.who strong { display: block; }
.note { color: #5b6475; font-size: .85rem; }
form { display: flex; gap: .75rem; margin-top: 1.25rem; }
button { font: inherit; padding: .55rem 1.1rem; border-radius: 6px; border: 1px solid #b9c0cc; background: #fff; cursor: pointer; }
button.primary { background: #2450c6; border-color: #2450c6; color: #fff; }
</style>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
<p>{{.Text}}</p>
{{with .Login}}
<div class="who">
<strong>{{.User.Name}}</strong>
{{if .User.Email}}<span>{{.User.Email}}</span><br>{{end}}
<span class="note">roles: {{range $i, $r := .User.Roles}}{{if $i}}, {{end}}{{$r}}{{end}}</span>
</div>
<form method="post" action="{{.Action}}">
<input type="hidden" name="request" value="{{.Request}}">
<button class="primary" type="submit" name="decision" value="approve" id="sign-in" autofocus>Sign in</button>
<button type="submit" name="decision" value="deny" id="cancel">Cancel</button>
</form>
{{end}}
<p class="note">This is the development issuer of <code>platform dev</code>. It signs in anyone who reaches this page, so it only ever runs on this machine; <code>platform serve</code> never starts it.</p>
</main>
</body>
</html>
`))

type loginView struct {
	User    User
	Action  string
	Request string
}

type pageView struct {
	Title, Text string
	Login       *loginView
}

// loginPage shows who will be signed in and to what, with one button.
func (i *Issuer) loginPage(w http.ResponseWriter, id string, ar *authRequest) {
	name := ar.client.Name
	if name == "" {
		name = ar.client.ID
	}
	// The form posts here, then redirects to the client: both must be
	// allowed form targets.
	origins := []string{"'self'"}
	if u, err := url.Parse(ar.redirectURI); err == nil {
		origins = append(origins, u.Scheme+"://"+u.Host)
	}
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action "+strings.Join(origins, " ")+"; frame-ancestors 'none'; base-uri 'none'")
	page(w, http.StatusOK, "Sign in to "+name, "One click signs you in as the development user:",
		&loginView{User: i.opts.User, Action: i.endpoint("/authorize"), Request: id})
}

func page(w http.ResponseWriter, status int, title, text string, login *loginView) {
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, pageView{Title: title, Text: text, Login: login}); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	if h.Get("Content-Security-Policy") == "" {
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
