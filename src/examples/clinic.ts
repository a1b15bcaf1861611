/** `clinic`: a group practice. Quirks: dates as 'YYYY-MM-DD' text, durations in seconds, inconsistently cased and padded city names, visit-type codes. */
import { FIRST_NAMES, LAST_NAMES } from "./names.js";
import { addYears, type Rng } from "./prng.js";
import type { Cell, ExampleDatabase, TableRows } from "./types.js";

const DDL = `
CREATE TABLE doctors (
  doctor_id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL,
  specialty TEXT NOT NULL,
  hire_date TEXT NOT NULL
);
CREATE TABLE patients (
  patient_id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL,
  sex TEXT NOT NULL,
  birth_date TEXT NOT NULL,
  city TEXT NOT NULL,
  blood_type TEXT
);
CREATE TABLE visits (
  visit_id INTEGER PRIMARY KEY,
  patient_id INTEGER NOT NULL,
  doctor_id INTEGER NOT NULL,
  visit_date TEXT NOT NULL,
  visit_type TEXT NOT NULL,
  duration INTEGER NOT NULL,
  diagnosis_code TEXT,
  follow_up INTEGER NOT NULL DEFAULT 0,
  FOREIGN KEY (patient_id) REFERENCES patients (patient_id),
  FOREIGN KEY (doctor_id) REFERENCES doctors (doctor_id)
);
CREATE INDEX idx_visits_patient ON visits (patient_id);
CREATE INDEX idx_visits_doctor ON visits (doctor_id);
`;

const SPECIALTIES: Record<string, { weight: number; codes: string[] }> = {
  "General Practice": { weight: 34, codes: ["J06.9", "I10", "E11.9", "M54.5", "J02.9", "R51", "K21.9", "F41.1"] },
  Pediatrics: { weight: 15, codes: ["J06.9", "H66.9", "J45.9", "A08.4", "L20.9", "Z00.1"] },
  Cardiology: { weight: 12, codes: ["I10", "I48", "I25.10", "R07.9", "I50.9", "E11.9"] },
  Dermatology: { weight: 11, codes: ["L20.9", "L70.0", "L40.0", "B35.1", "L30.9"] },
  Orthopedics: { weight: 10, codes: ["M54.5", "M17.11", "S93.4", "M75.1", "S52.5"] },
  Neurology: { weight: 9, codes: ["G43.9", "R51", "G40.9", "G35", "G47.0"] },
  Psychiatry: { weight: 9, codes: ["F41.1", "F32.9", "F90.0", "F43.1"] },
};

const CITIES = { London: 30, Manchester: 18, Leeds: 14, Birmingham: 14, Bristol: 12, Glasgow: 12 };
const BLOOD_TYPES = { "O+": 35, "A+": 30, "B+": 9, "AB+": 3, "O-": 13, "A-": 6, "B-": 2, "AB-": 1 };
const VISIT_TYPES = { OP: 72, ER: 16, TEL: 12 };
const DURATION_S: Record<string, [number, number]> = { OP: [600, 2700], ER: [1800, 16200], TEL: [300, 1500] };

function messyCity(rng: Rng, city: string): string {
  const form = rng.weighted({ canonical: 60, lower: 16, upper: 14, padded: 10 });
  if (form === "lower") return city.toLowerCase();
  if (form === "upper") return city.toUpperCase();
  if (form === "padded") return `${city} `;
  return city;
}

function weightedIndex(rng: Rng, weights: number[]): number {
  const total = weights.reduce((a, b) => a + b, 0);
  let r = rng.next() * total;
  for (let i = 0; i < weights.length; i++) {
    r -= weights[i]!;
    if (r < 0) return i;
  }
  return weights.length - 1;
}

function generate(rng: Rng): TableRows[] {
  const specialtyWeights = Object.fromEntries(Object.entries(SPECIALTIES).map(([name, s]) => [name, s.weight]));
  const doctors: Record<string, Cell>[] = [];
  const doctorLoad: number[] = [];
  for (let id = 1; id <= 110; id++) {
    doctors.push({
      doctor_id: id,
      first_name: rng.pick(FIRST_NAMES),
      last_name: rng.pick(LAST_NAMES),
      specialty: rng.weighted(specialtyWeights),
      hire_date: rng.date("1998-01-01", "2023-09-30"),
    });
    doctorLoad.push(1 + rng.next() * 4);
  }

  const patients: Record<string, Cell>[] = [];
  const frequency: number[] = [];
  for (let id = 1; id <= 700; id++) {
    const minor = rng.chance(0.2);
    const birth = minor ? rng.date("2006-07-01", "2022-12-31") : rng.date("1932-01-01", "2005-12-31");
    patients.push({
      patient_id: id,
      first_name: rng.pick(FIRST_NAMES),
      last_name: rng.pick(LAST_NAMES),
      sex: rng.weighted({ F: 51, M: 49 }),
      birth_date: birth,
      city: messyCity(rng, rng.weighted(CITIES)),
      blood_type: rng.chance(0.04) ? null : rng.weighted(BLOOD_TYPES),
    });
    frequency.push(1 + 6 * rng.next() ** 3 + (birth < "1955-01-01" ? 2 : 0));
  }

  const adulthood = patients.map((p) => addYears(p.birth_date as string, 18));
  const visits: Record<string, Cell>[] = [];
  for (let id = 1; id <= 2000; id++) {
    const doctor = doctors[weightedIndex(rng, doctorLoad)]!;
    const specialty = doctor.specialty as string;
    const date = rng.date("2021-01-01", "2024-06-30");
    const wantMinor = specialty === "Pediatrics" ? rng.chance(0.9) : rng.chance(0.04);
    const weights = patients.map((p, i) => {
      const birth = p.birth_date as string;
      if (birth > date) return 0;
      const isMinor = adulthood[i]! > date;
      return isMinor === wantMinor ? frequency[i]! : 0;
    });
    const patient = patients[weightedIndex(rng, weights)]!;
    const type = specialty === "Psychiatry" ? rng.weighted({ OP: 55, TEL: 40, ER: 5 }) : rng.weighted(VISIT_TYPES);
    const [lo, hi] = DURATION_S[type]!;
    visits.push({
      visit_id: id,
      patient_id: patient.patient_id as number,
      doctor_id: doctor.doctor_id as number,
      visit_date: date,
      visit_type: type,
      duration: lo + Math.floor((hi - lo) * rng.next() ** 1.6),
      diagnosis_code: rng.chance(0.05) ? null : rng.pick(SPECIALTIES[specialty]!.codes),
      follow_up: rng.chance(0.25) ? 1 : 0,
    });
  }
  visits.sort((a, b) => (a.visit_date as string).localeCompare(b.visit_date as string) || (a.visit_id as number) - (b.visit_id as number));
  visits.forEach((v, i) => (v.visit_id = i + 1));

  return [
    { table: "doctors", rows: doctors },
    { table: "patients", rows: patients },
    { table: "visits", rows: visits },
  ];
}

/** The `clinic` example database. */
export const clinic: ExampleDatabase = {
  dbId: "clinic",
  ddl: DDL,
  generate,
  questions: [
    {
      question: "How many doctors specialise in dermatology?",
      evidence: "",
      SQL: "SELECT COUNT(*) FROM doctors WHERE specialty = 'Dermatology'",
      difficulty: "simple",
      naive: "SELECT COUNT(*) FROM doctors WHERE specialty = 'dermatology'",
    },
    {
      question: "How many patients live in Leeds?",
      evidence: "",
      SQL: "SELECT COUNT(*) FROM patients WHERE LOWER(TRIM(city)) = 'leeds'",
      difficulty: "simple",
      naive: "SELECT COUNT(*) FROM patients WHERE city = 'Leeds'",
    },
    {
      question: "How many female patients have blood type O negative?",
      evidence: "",
      SQL: "SELECT COUNT(*) FROM patients WHERE sex = 'F' AND blood_type = 'O-'",
      difficulty: "simple",
      naive: "SELECT COUNT(*) FROM patients WHERE sex = 'female' AND blood_type = 'O negative'",
    },
    {
      question: "How many visits lasted longer than half an hour?",
      evidence: "",
      SQL: "SELECT COUNT(*) FROM visits WHERE duration > 1800",
      difficulty: "simple",
      naive: "SELECT COUNT(*) FROM visits WHERE duration > 30",
    },
    {
      question: "What is the average length, in minutes, of visits to cardiologists?",
      evidence: "cardiologists refers to specialty = 'Cardiology'",
      SQL: "SELECT AVG(v.duration) / 60.0 FROM visits AS v INNER JOIN doctors AS d ON v.doctor_id = d.doctor_id WHERE d.specialty = 'Cardiology'",
      difficulty: "moderate",
      naive: "SELECT AVG(v.duration) FROM visits AS v INNER JOIN doctors AS d ON v.doctor_id = d.doctor_id WHERE d.specialty = 'Cardiology'",
    },
    {
      question: "How many telehealth visits took place in 2022?",
      evidence: "telehealth refers to visit_type",
      SQL: "SELECT COUNT(*) FROM visits WHERE visit_type = 'TEL' AND visit_date LIKE '2022-%'",
      difficulty: "moderate",
      naive: "SELECT COUNT(*) FROM visits WHERE visit_type = 'telehealth' AND visit_date LIKE '2022-%'",
    },
    {
      question: "Which doctor saw the largest number of different patients? Give the full name.",
      evidence: "full name refers to first_name, last_name",
      SQL: "SELECT d.first_name, d.last_name FROM doctors AS d INNER JOIN visits AS v ON d.doctor_id = v.doctor_id GROUP BY d.doctor_id ORDER BY COUNT(DISTINCT v.patient_id) DESC LIMIT 1",
      difficulty: "moderate",
    },
    {
      question: "How many hours in total did patients from London spend in emergency visits?",
      evidence: "emergency visits refers to visit_type",
      SQL: "SELECT SUM(v.duration) / 3600.0 FROM visits AS v INNER JOIN patients AS p ON v.patient_id = p.patient_id WHERE v.visit_type = 'ER' AND LOWER(TRIM(p.city)) = 'london'",
      difficulty: "moderate",
      naive:
        "SELECT SUM(v.duration) / 3600.0 FROM visits AS v INNER JOIN patients AS p ON v.patient_id = p.patient_id WHERE v.visit_type = 'emergency' AND p.city = 'London'",
    },
    {
      question: "How many patients were at least 65 years old on 1 January 2024?",
      evidence: "",
      SQL: "SELECT COUNT(*) FROM patients WHERE birth_date <= '1959-01-01'",
      difficulty: "moderate",
    },
    {
      question: "Which specialty has the longest average visit duration?",
      evidence: "",
      SQL: "SELECT d.specialty FROM doctors AS d INNER JOIN visits AS v ON d.doctor_id = v.doctor_id GROUP BY d.specialty ORDER BY AVG(v.duration) DESC LIMIT 1",
      difficulty: "moderate",
    },
    {
      question: "How many visits were recorded in the busiest month of 2023?",
      evidence: "busiest month refers to the calendar month with the most visits",
      SQL: "SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM visits WHERE visit_date LIKE '2023-%' GROUP BY strftime('%m', visit_date))",
      difficulty: "moderate",
    },
    {
      question: "How many different patients from Manchester have been diagnosed with type 2 diabetes?",
      evidence: "type 2 diabetes refers to diagnosis_code = 'E11.9'",
      SQL: "SELECT COUNT(DISTINCT p.patient_id) FROM patients AS p INNER JOIN visits AS v ON p.patient_id = v.patient_id WHERE v.diagnosis_code = 'E11.9' AND LOWER(TRIM(p.city)) = 'manchester'",
      difficulty: "challenging",
      naive:
        "SELECT COUNT(DISTINCT p.patient_id) FROM patients AS p INNER JOIN visits AS v ON p.patient_id = v.patient_id WHERE v.diagnosis_code = 'E11.9' AND p.city = 'Manchester'",
    },
    {
      question: "List the full names of patients who had more than three emergency visits.",
      evidence: "full name refers to first_name, last_name; emergency visits refers to visit_type",
      SQL: "SELECT p.first_name, p.last_name FROM patients AS p INNER JOIN visits AS v ON p.patient_id = v.patient_id WHERE v.visit_type = 'ER' GROUP BY p.patient_id HAVING COUNT(*) > 3",
      difficulty: "challenging",
      naive:
        "SELECT p.first_name, p.last_name FROM patients AS p INNER JOIN visits AS v ON p.patient_id = v.patient_id WHERE v.visit_type = 'emergency' GROUP BY p.patient_id HAVING COUNT(*) > 3",
    },
    {
      question: "What percentage of visits to pediatricians were made by patients who were under 18 on the day of the visit?",
      evidence: "pediatricians refers to specialty = 'Pediatrics'; under 18 means the visit took place before the patient's 18th birthday",
      SQL: "SELECT CAST(SUM(CASE WHEN date(p.birth_date, '+18 years') > v.visit_date THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(*) FROM visits AS v INNER JOIN doctors AS d ON v.doctor_id = d.doctor_id INNER JOIN patients AS p ON v.patient_id = p.patient_id WHERE d.specialty = 'Pediatrics'",
      difficulty: "challenging",
    },
    {
      question: "How many patients have had more visits than the average number of visits per patient?",
      evidence: "average number of visits per patient is computed over patients with at least one visit",
      SQL: "SELECT COUNT(*) FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id) AS t WHERE t.n > (SELECT AVG(n) FROM (SELECT COUNT(*) AS n FROM visits GROUP BY patient_id))",
      difficulty: "challenging",
    },
  ],
};
