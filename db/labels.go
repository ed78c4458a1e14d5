package db

// CheckLabelChange refuses label changes an API key may not make.
func CheckLabelChange(add, remove []string) error {
	for _, l := range append(append([]string(nil), add...), remove...) {
		if l == LabelQuarantined {
			return Errorf(ECodeQuarantineReview, "the quarantined label can only be changed by a person in the review dashboard")
		}
	}
	return nil
}
