package schema

import (
	"net/url"
	"testing"
)

func BenchmarkBodySendSmall(b *testing.B) {
	v, err := New()
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(obj(sendBase, map[string]any{"cc": emails(3), "subject": "Hello", "html": "<p>Hello</p>", "labels": []string{"x"}}))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := v.Body("send", body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBodySend2MiBAttachments(b *testing.B) {
	v, err := New()
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": b64(1 << 20)}), attachment(map[string]any{"content": b64(1 << 20)})}}))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := v.Body("send", body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDuplicateKey is the repeated-key check alone, on the bodies above: its share of
// Body's time is what it costs every request.
func BenchmarkDuplicateKey(b *testing.B) {
	for name, body := range map[string]string{
		"SendSmall":           obj(sendBase, map[string]any{"cc": emails(3), "subject": "Hello", "html": "<p>Hello</p>", "labels": []string{"x"}}),
		"Send2MiBAttachments": obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": b64(1 << 20)}), attachment(map[string]any{"content": b64(1 << 20)})}}),
	} {
		raw := []byte(body)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if err := duplicateKey(raw, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkQueryListMessages(b *testing.B) {
	v, err := New()
	if err != nil {
		b.Fatal(err)
	}
	q := url.Values{"limit": {"50"}, "labels": {"a", "b"}, "category": {"billing"}}
	for b.Loop() {
		if _, err := v.Query("listMessages", q); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenAPI(b *testing.B) {
	v, err := New()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := v.OpenAPI("https://mail.example.com"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		if _, err := New(); err != nil {
			b.Fatal(err)
		}
	}
}
