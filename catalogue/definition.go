package catalogue

// Definition is what every catalogue kind has in common, so storage and
// the admin API handle all four kinds with one code path.
type Definition interface {
	Kind() Kind
	// ItemName is the name the item is addressed by.
	ItemName() string
	// ItemURI is the resource URI for static resources, else "".
	ItemURI() string
	// WebhookHandler is the item's handler, or nil.
	WebhookHandler() *Handler
	// Validate reports every problem with the definition.
	Validate() error
}

// New returns an empty definition of kind k, or nil for an unknown kind.
func New(k Kind) Definition {
	switch k {
	case KindTool:
		return &Tool{}
	case KindPrompt:
		return &Prompt{}
	case KindResource:
		return &Resource{}
	case KindResourceTemplate:
		return &ResourceTemplate{}
	}
	return nil
}

func (*Tool) Kind() Kind                             { return KindTool }
func (t *Tool) ItemName() string                     { return t.Name }
func (*Tool) ItemURI() string                        { return "" }
func (t *Tool) WebhookHandler() *Handler             { return t.Handler }
func (t *Tool) Validate() error                      { return ValidateTool(t) }
func (*Prompt) Kind() Kind                           { return KindPrompt }
func (p *Prompt) ItemName() string                   { return p.Name }
func (*Prompt) ItemURI() string                      { return "" }
func (p *Prompt) WebhookHandler() *Handler           { return p.Handler }
func (p *Prompt) Validate() error                    { return ValidatePrompt(p) }
func (*Resource) Kind() Kind                         { return KindResource }
func (r *Resource) ItemName() string                 { return r.Name }
func (r *Resource) ItemURI() string                  { return r.URI }
func (*Resource) WebhookHandler() *Handler           { return nil }
func (r *Resource) Validate() error                  { return ValidateResource(r) }
func (*ResourceTemplate) Kind() Kind                 { return KindResourceTemplate }
func (r *ResourceTemplate) ItemName() string         { return r.Name }
func (*ResourceTemplate) ItemURI() string            { return "" }
func (r *ResourceTemplate) WebhookHandler() *Handler { return r.Handler }
func (r *ResourceTemplate) Validate() error          { return ValidateResourceTemplate(r) }
