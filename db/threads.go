package db

// Thread size limits of getThread (API-NOTES section 5).
const (
	MaxThreadMessages  = 500
	MaxThreadBodyBytes = 8 << 20
)
