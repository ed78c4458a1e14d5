package benchkit

import "strings"

// The raw material of the corpus. The common words come first in rough order of
// frequency: a word's place in this list is its Zipf rank, so reordering changes every
// generated message.

var commonWords = strings.Fields(`the of and to a in is you that it for on was with as have be at this are
not but from or by your we can will an all if about my one would there their what so up out
which me when make like time no just him know take people into year good some could them see
other than then now look only come its over think also back after use two how our work first
well way even new want because any these give day most us thanks please let hi hello regards
best team meeting project update report invoice order payment account customer support issue
question review plan week today tomorrow monday tuesday wednesday thursday friday schedule call
email message attached file document contract price quote delivery shipping status request
need help office budget sales marketing client service product release version feature
bug fix test deploy server database login password security access user data analysis draft
proposal agenda notes summary deadline quarter revenue cost estimate approval feedback launch
lunch dinner coffee travel flight hotel booking confirmation receipt refund subscription
renewal trial upgrade pricing discount offer newsletter event webinar conference speaker
slides presentation recording link calendar invite reminder follow discuss share send receive
check confirm cancel change move complete pending approve reject sign submit upload
download install configure migrate backup restore monitor alert incident outage maintenance
network storage cluster api endpoint token key certificate domain dns cloud region instance
morning afternoon evening weekend holiday vacation birthday family kids school doctor appointment
happy sorry great sure fine again really looking forward hearing soon quick note
january february march april may june july august september october november december`)

// syllables make the long tail of made-up words: rare terms, product names, jargon.
var syllables = strings.Fields("ka lo mi ne ra su to ve xi zo bra cre dri flo gra pli stu tro an el in or un ex ter mon dal fin gor")

var firstNames = strings.Fields(`Alice Bob Carol David Erin Frank Grace Heidi Ivan Judy Karl Laura Mallory Nina
Oscar Peggy Quentin Rupert Sybil Trent Ursula Victor Wendy Xavier Yolanda Zach Maria Jose Wei Li
Fatima Ahmed Olga Sven Ingrid Pierre Chloe Hiro Yuki Priya Raj Amara Kofi Lucia Mateo Elena Tomas`)

var lastNames = strings.Fields(`Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez
Lopez Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris
Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores`)

// companies name the senders' domains and the links in the text.
var companies = strings.Fields(`acme globex initech umbrella hooli vehement massive dynamics stark wayne
wonka cyberdyne tyrell soylent oscorp aperture blackmesa gringotts monarch vandelay pendant
bluth dunder sterling prestige northwind contoso fabrikam tailspin wingtip adventure litware
proseware fourthcoffee alpine margie woodgrove treyresearch lucerne humongous coho datum`)

// tlds repeats "com" to weigh it as mail does.
var tlds = []string{"com", "com", "com", "io", "org", "net", "co.uk", "de"}
