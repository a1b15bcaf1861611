/** `retail`: an online shop. Quirks: ISO country codes, three-letter status codes, tier letters, money in integer cents. */
import { FIRST_NAMES, LAST_NAMES, ADJECTIVES, NOUNS } from "./names.js";
import type { Rng } from "./prng.js";
import type { Cell, ExampleDatabase, TableRows } from "./types.js";

const DDL = `
CREATE TABLE customers (
  customer_id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  country TEXT NOT NULL,
  city TEXT NOT NULL,
  tier TEXT NOT NULL,
  signup_date TEXT NOT NULL
);
CREATE TABLE products (
  product_id INTEGER PRIMARY KEY,
  sku TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  category TEXT NOT NULL,
  list_price INTEGER NOT NULL,
  discontinued INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE orders (
  order_id INTEGER PRIMARY KEY,
  customer_id INTEGER NOT NULL,
  order_date TEXT NOT NULL,
  status TEXT NOT NULL,
  ship_country TEXT NOT NULL,
  shipping_fee INTEGER NOT NULL,
  FOREIGN KEY (customer_id) REFERENCES customers (customer_id)
);
CREATE TABLE order_items (
  order_id INTEGER NOT NULL,
  product_id INTEGER NOT NULL,
  quantity INTEGER NOT NULL,
  unit_price INTEGER NOT NULL,
  PRIMARY KEY (order_id, product_id),
  FOREIGN KEY (order_id) REFERENCES orders (order_id),
  FOREIGN KEY (product_id) REFERENCES products (product_id)
);
CREATE INDEX idx_orders_customer ON orders (customer_id);
CREATE INDEX idx_order_items_product ON order_items (product_id);
`;

const COUNTRIES: Record<string, { weight: number; cities: string[]; fees: number[] }> = {
  GB: { weight: 24, cities: ["London", "Manchester", "Bristol", "Edinburgh", "Leeds"], fees: [0, 399, 499] },
  US: { weight: 24, cities: ["New York", "Chicago", "Austin", "Seattle", "Boston"], fees: [0, 799, 1299] },
  DE: { weight: 12, cities: ["Berlin", "Munich", "Hamburg", "Cologne"], fees: [499, 899] },
  FR: { weight: 10, cities: ["Paris", "Lyon", "Marseille", "Toulouse"], fees: [499, 899] },
  CA: { weight: 8, cities: ["Toronto", "Vancouver", "Montreal"], fees: [999, 1499] },
  AU: { weight: 7, cities: ["Sydney", "Melbourne", "Brisbane"], fees: [1499, 1999] },
  NL: { weight: 6, cities: ["Amsterdam", "Rotterdam", "Utrecht"], fees: [499, 899] },
  IE: { weight: 5, cities: ["Dublin", "Cork", "Galway"], fees: [399, 699] },
  ES: { weight: 4, cities: ["Madrid", "Barcelona", "Valencia"], fees: [499, 899] },
};

const BRANDS = ["Acme", "Northwind", "Lumen", "Kestrel", "Orbit", "Hearth", "Fjord", "Pebble", "Atlas", "Juniper"];

const CATEGORIES: Record<string, { weight: number; items: [string, number, number][] }> = {
  Electronics: {
    weight: 22,
    items: [
      ["Wireless Earbuds", 29, 199],
      ["USB-C Charger", 12, 49],
      ["Bluetooth Speaker", 25, 249],
      ["Smart Watch", 99, 429],
      ["Mechanical Keyboard", 59, 189],
      ["Webcam", 35, 149],
      ["Portable SSD", 69, 299],
      ["Noise-Cancelling Headphones", 149, 399],
      ["E-Reader", 89, 249],
      ["Action Camera", 129, 449],
    ],
  },
  "Home & Kitchen": {
    weight: 22,
    items: [
      ["Chef's Knife", 25, 160],
      ["Cast Iron Skillet", 20, 90],
      ["French Press", 15, 55],
      ["Stand Mixer", 149, 449],
      ["Linen Duvet Cover", 59, 189],
      ["Ceramic Mug Set", 14, 45],
      ["Air Fryer", 69, 229],
      ["Bamboo Cutting Board", 12, 49],
      ["Espresso Machine", 179, 649],
      ["Storage Jars", 9, 39],
    ],
  },
  Books: {
    weight: 18,
    items: [
      ["Paperback", 7, 19],
      ["Hardcover", 16, 38],
    ],
  },
  "Toys & Games": {
    weight: 14,
    items: [
      ["Building Blocks Set", 19, 129],
      ["Jigsaw Puzzle", 9, 29],
      ["Board Game", 19, 69],
      ["Plush Bear", 9, 35],
      ["RC Car", 29, 119],
      ["Card Game", 6, 24],
      ["Science Kit", 19, 59],
      ["Wooden Train Set", 29, 99],
    ],
  },
  Outdoor: {
    weight: 14,
    items: [
      ["Hiking Backpack", 49, 229],
      ["Camping Tent", 89, 499],
      ["Trekking Poles", 25, 129],
      ["Sleeping Bag", 39, 259],
      ["Water Bottle", 12, 45],
      ["Headlamp", 15, 69],
      ["Rain Jacket", 59, 299],
      ["Camping Stove", 29, 149],
    ],
  },
  Beauty: {
    weight: 10,
    items: [
      ["Face Serum", 15, 89],
      ["Hand Cream", 6, 29],
      ["Shampoo Bar", 7, 16],
      ["Lip Balm Trio", 6, 14],
      ["Sunscreen SPF50", 9, 32],
      ["Beard Oil", 12, 35],
      ["Eau de Parfum", 39, 149],
    ],
  },
};

const TIERS = { B: 52, S: 28, G: 15, P: 5 };
const STATUSES = { SHP: 68, PND: 10, CNC: 13, RTN: 9 };

function generate(rng: Rng): TableRows[] {
  const countryWeights = Object.fromEntries(Object.entries(COUNTRIES).map(([code, c]) => [code, c.weight]));
  const customers: Record<string, Cell>[] = [];
  for (let id = 1; id <= 450; id++) {
    const first = rng.pick(FIRST_NAMES);
    const last = rng.pick(LAST_NAMES);
    const country = rng.weighted(countryWeights);
    customers.push({
      customer_id: id,
      first_name: first,
      last_name: last,
      email: `${first}.${last}${id}@example.com`.toLowerCase().replace(/[^a-z0-9.@-]/g, ""),
      country,
      city: rng.pick(COUNTRIES[country]!.cities),
      tier: rng.weighted(TIERS),
      signup_date: rng.date("2021-01-01", "2024-03-31"),
    });
  }

  const categoryWeights = Object.fromEntries(Object.entries(CATEGORIES).map(([name, c]) => [name, c.weight]));
  const products: Record<string, Cell>[] = [];
  const names = new Set<string>();
  for (let id = 1; id <= 140; id++) {
    const category = rng.weighted(categoryWeights);
    const spec = CATEGORIES[category]!;
    let name = "";
    let item: [string, number, number];
    do {
      item = rng.pick(spec.items);
      name = category === "Books" ? `${rng.pick(ADJECTIVES)} ${rng.pick(NOUNS)} (${item[0]})` : `${rng.pick(BRANDS)} ${item[0]}`;
    } while (names.has(name));
    names.add(name);
    const dollars = item[1] + Math.floor((item[2] - item[1]) * rng.next() ** 1.5);
    products.push({
      product_id: id,
      sku: `SKU-${String(id).padStart(5, "0")}`,
      name,
      category,
      list_price: dollars * 100 + rng.pick([99, 95, 49, 0]),
      discontinued: rng.chance(0.12) ? 1 : 0,
    });
  }

  const buyers = rng.shuffle(customers).slice(0, Math.round(customers.length * 0.88));
  const orders: Record<string, Cell>[] = [];
  const items: Record<string, Cell>[] = [];
  for (let id = 1; id <= 800; id++) {
    const customer = rng.pick(buyers);
    const signup = customer.signup_date as string;
    const country = rng.chance(0.92) ? (customer.country as string) : rng.weighted(countryWeights);
    orders.push({
      order_id: id,
      customer_id: customer.customer_id as number,
      order_date: rng.date(signup > "2022-01-01" ? signup : "2022-01-01", "2024-06-30"),
      status: rng.weighted(STATUSES),
      ship_country: country,
      shipping_fee: rng.pick(COUNTRIES[country]!.fees),
    });
    const lines = Number(rng.weighted({ 1: 36, 2: 30, 3: 20, 4: 14 }));
    for (const product of rng.sample(products, lines)) {
      const price = product.list_price as number;
      items.push({
        order_id: id,
        product_id: product.product_id as number,
        quantity: Number(rng.weighted({ 1: 70, 2: 20, 3: 10 })),
        unit_price: rng.chance(0.15) ? Math.round(price * 0.9) : price,
      });
    }
  }

  return [
    { table: "customers", rows: customers },
    { table: "products", rows: products },
    { table: "orders", rows: orders },
    { table: "order_items", rows: items },
  ];
}

/** The `retail` example database. */
export const retail: ExampleDatabase = {
  dbId: "retail",
  ddl: DDL,
  generate,
  questions: [
    {
      question: "How many orders were shipped to the United Kingdom?",
      evidence: "shipped to the United Kingdom refers to the order's ship_country; shipped refers to the order's status",
      SQL: "SELECT COUNT(*) FROM orders WHERE ship_country = 'GB' AND status = 'SHP'",
      difficulty: "simple",
      naive: "SELECT COUNT(*) FROM orders WHERE ship_country = 'United Kingdom' AND status = 'shipped'",
    },
    {
      question: "How many customers live in Germany?",
      evidence: "",
      SQL: "SELECT COUNT(*) FROM customers WHERE country = 'DE'",
      difficulty: "simple",
      naive: "SELECT COUNT(*) FROM customers WHERE country = 'Germany'",
    },
    {
      question: "What is the list price, in dollars, of the product with SKU SKU-00042?",
      evidence: "list_price is stored in cents",
      SQL: "SELECT list_price / 100.0 FROM products WHERE sku = 'SKU-00042'",
      difficulty: "simple",
    },
    {
      question: "How many gold-tier customers are there in Australia?",
      evidence: "gold-tier refers to the customer's tier",
      SQL: "SELECT COUNT(*) FROM customers WHERE tier = 'G' AND country = 'AU'",
      difficulty: "simple",
      naive: "SELECT COUNT(*) FROM customers WHERE tier = 'gold' AND country = 'Australia'",
    },
    {
      question: "List the names of the five most expensive products that are still on sale.",
      evidence: "still on sale refers to discontinued = 0; most expensive refers to the highest list_price",
      SQL: "SELECT name FROM products WHERE discontinued = 0 ORDER BY list_price DESC LIMIT 5",
      difficulty: "simple",
    },
    {
      question: "What was the total value, in dollars, of the items in all cancelled orders?",
      evidence: "value of an item = quantity * unit_price; money amounts are stored in cents; cancelled refers to the order's status",
      SQL: "SELECT SUM(oi.quantity * oi.unit_price) / 100.0 FROM order_items AS oi INNER JOIN orders AS o ON oi.order_id = o.order_id WHERE o.status = 'CNC'",
      difficulty: "moderate",
      naive:
        "SELECT SUM(oi.quantity * oi.unit_price) / 100.0 FROM order_items AS oi INNER JOIN orders AS o ON oi.order_id = o.order_id WHERE o.status = 'cancelled'",
    },
    {
      question: "What is the average shipping fee, in dollars, of orders sent to Canada?",
      evidence: "sent to Canada refers to ship_country; shipping_fee is stored in cents",
      SQL: "SELECT AVG(shipping_fee) / 100.0 FROM orders WHERE ship_country = 'CA'",
      difficulty: "moderate",
      naive: "SELECT AVG(shipping_fee) / 100.0 FROM orders WHERE ship_country = 'Canada'",
    },
    {
      question: "Which product category sold the most units in shipped orders?",
      evidence: "units refers to quantity; shipped refers to the order's status",
      SQL: "SELECT p.category FROM order_items AS oi INNER JOIN orders AS o ON oi.order_id = o.order_id INNER JOIN products AS p ON oi.product_id = p.product_id WHERE o.status = 'SHP' GROUP BY p.category ORDER BY SUM(oi.quantity) DESC LIMIT 1",
      difficulty: "moderate",
      naive:
        "SELECT p.category FROM order_items AS oi INNER JOIN orders AS o ON oi.order_id = o.order_id INNER JOIN products AS p ON oi.product_id = p.product_id WHERE o.status = 'shipped' GROUP BY p.category ORDER BY SUM(oi.quantity) DESC LIMIT 1",
    },
    {
      question: "How many orders were placed in March 2023?",
      evidence: "",
      SQL: "SELECT COUNT(*) FROM orders WHERE order_date LIKE '2023-03-%'",
      difficulty: "moderate",
    },
    {
      question: "What percentage of the orders sent to France were returned?",
      evidence: "sent to France refers to ship_country; returned refers to the order's status; percentage = count of returned orders * 100 / count of orders",
      SQL: "SELECT CAST(SUM(CASE WHEN status = 'RTN' THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(*) FROM orders WHERE ship_country = 'FR'",
      difficulty: "moderate",
      naive: "SELECT CAST(SUM(CASE WHEN status = 'returned' THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(*) FROM orders WHERE ship_country = 'France'",
    },
    {
      question: "How many orders contain at least one discontinued product?",
      evidence: "discontinued refers to discontinued = 1",
      SQL: "SELECT COUNT(DISTINCT oi.order_id) FROM order_items AS oi INNER JOIN products AS p ON oi.product_id = p.product_id WHERE p.discontinued = 1",
      difficulty: "moderate",
    },
    {
      question: "What is the full name of the customer who spent the most on orders that were neither cancelled nor returned?",
      evidence: "full name refers to first_name, last_name; amount spent = SUM(quantity * unit_price); cancelled and returned refer to the order's status",
      SQL: "SELECT c.first_name, c.last_name FROM customers AS c INNER JOIN orders AS o ON c.customer_id = o.customer_id INNER JOIN order_items AS oi ON o.order_id = oi.order_id WHERE o.status NOT IN ('CNC', 'RTN') GROUP BY c.customer_id ORDER BY SUM(oi.quantity * oi.unit_price) DESC LIMIT 1",
      difficulty: "challenging",
    },
    {
      question: "List the email addresses of customers from the United States who have never placed an order.",
      evidence: "",
      SQL: "SELECT email FROM customers WHERE country = 'US' AND customer_id NOT IN (SELECT customer_id FROM orders)",
      difficulty: "challenging",
      naive: "SELECT email FROM customers WHERE country = 'United States' AND customer_id NOT IN (SELECT customer_id FROM orders)",
    },
    {
      question: "Which destination country received the most shipped orders placed in 2023, and how many were there?",
      evidence: "destination country refers to ship_country; shipped refers to the order's status",
      SQL: "SELECT ship_country, COUNT(*) FROM orders WHERE status = 'SHP' AND order_date BETWEEN '2023-01-01' AND '2023-12-31' GROUP BY ship_country ORDER BY COUNT(*) DESC LIMIT 1",
      difficulty: "challenging",
      naive:
        "SELECT ship_country, COUNT(*) FROM orders WHERE status = 'shipped' AND order_date BETWEEN '2023-01-01' AND '2023-12-31' GROUP BY ship_country ORDER BY COUNT(*) DESC LIMIT 1",
    },
    {
      question: "Which products cost more than twice the average list price of their category?",
      evidence: "",
      SQL: "SELECT p.name FROM products AS p WHERE p.list_price > 2 * (SELECT AVG(p2.list_price) FROM products AS p2 WHERE p2.category = p.category)",
      difficulty: "challenging",
    },
  ],
};
