/** Small embedded name lists shared by the example generators. */

/** Given names from several regions. */
export const FIRST_NAMES = [
  "Oliver", "Amelia", "James", "Isla", "Noah", "Ava", "Liam", "Mia", "Lucas", "Sofia",
  "Ethan", "Chloe", "Mateo", "Grace", "Arjun", "Priya", "Wei", "Mei", "Kenji", "Yuki",
  "Hannah", "Jonas", "Lena", "Felix", "Emma", "Louis", "Camille", "Hugo", "Ines", "Diego",
  "Lucia", "Aoife", "Ciaran", "Sean", "Niamh", "Daniel", "Sarah", "Thomas", "Laura", "Samuel",
  "Fatima", "Omar", "Amara", "Kwame", "Zara", "Ravi", "Anika", "Jack", "Ruby", "Finn",
  "Elena", "Marco", "Sven", "Freya", "Nora", "Tariq", "Leila", "Min-jun", "Ji-woo", "Chidi",
] as const;

/** Family names from several regions. */
export const LAST_NAMES = [
  "Smith", "Jones", "Taylor", "Brown", "Williams", "Wilson", "Johnson", "Davies", "Patel", "Khan",
  "Murphy", "O'Brien", "Kelly", "Walsh", "Byrne", "Garcia", "Martinez", "Lopez", "Muller", "Schmidt",
  "Schneider", "Fischer", "Weber", "Dubois", "Martin", "Bernard", "Moreau", "Laurent", "Rossi", "Bianchi",
  "Jansen", "de Vries", "Bakker", "Nguyen", "Tran", "Kim", "Lee", "Park", "Chen", "Wang",
  "Li", "Zhang", "Tanaka", "Sato", "Suzuki", "Okafor", "Adeyemi", "Mensah", "Singh", "Sharma",
  "Johansson", "Andersson", "Novak", "Kowalski", "Silva", "Santos", "Cohen", "Haddad", "Ali", "Evans",
] as const;

/** Words for album, track and product titles. */
export const ADJECTIVES = [
  "Midnight", "Golden", "Silent", "Electric", "Velvet", "Broken", "Neon", "Hollow", "Wild", "Paper",
  "Crimson", "Distant", "Lucky", "Frozen", "Burning", "Gentle", "Restless", "Secret", "Borrowed", "Quiet",
  "Lonely", "Endless", "Sunday", "Summer", "Northern", "Bitter", "Sweet", "Faded", "Brave", "Little",
] as const;

/** Nouns for album, track and product titles. */
export const NOUNS = [
  "Transit", "Houses", "Rivers", "Signals", "Hearts", "Streets", "Dreams", "Mirrors", "Engines", "Gardens",
  "Horizon", "Echoes", "Satellite", "Harbour", "Parade", "Letters", "Thunder", "Shadows", "Lights", "Window",
  "Machine", "Season", "Fever", "Static", "Weather", "Island", "Avenue", "Ritual", "Morning", "Circuit",
] as const;
