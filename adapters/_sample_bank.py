"""Questions, answers and reasoning snippets for the sample debates (see :mod:`adapters.samples`).

Each entry: a question, the correct answer with a short derivation, and wrong answers, each with the
flawed derivation an agent might write and the rebuttal another agent would give.
"""

from __future__ import annotations

from typing import NamedTuple


class Wrong(NamedTuple):
    answer: str
    reasoning: str
    rebuttal: str


class Question(NamedTuple):
    topic: str
    question: str
    answer: str
    reasoning: str
    wrong: tuple[Wrong, ...]


BANK: tuple[Question, ...] = (
    Question(
        "arithmetic",
        "What is 17 × 24?",
        "408",
        "Split the product: 17 × 24 = 17 × 20 + 17 × 4 = 340 + 68 = 408.",
        (
            Wrong(
                "398",
                "17 × 24 = 17 × 25 − 17 = 425 − 17 = 398.",
                "425 − 17 is 408, not 398; the subtraction was done wrong",
            ),
            Wrong(
                "418",
                "24 × 17 = 24 × 10 + 24 × 7 = 240 + 178 = 418.",
                "24 × 7 is 168, not 178",
            ),
        ),
    ),
    Question(
        "number theory",
        "How many positive divisors does 360 have?",
        "24",
        "360 = 2^3 · 3^2 · 5, so the count is (3+1)(2+1)(1+1) = 4 · 3 · 2 = 24.",
        (
            Wrong(
                "18",
                "360 = 2^2 · 3^2 · 10, so the number of divisors is (2+1)(2+1)(1+1) = 18.",
                "10 is not prime; the factorisation is 2^3 · 3^2 · 5, which gives 24",
            ),
            Wrong(
                "6",
                "The exponents in 2^3 · 3^2 · 5 are 3, 2 and 1, and 3 · 2 · 1 = 6.",
                "each exponent must be increased by one before multiplying",
            ),
        ),
    ),
    Question(
        "algebra",
        "Solve for x: 3x + 7 = 25.",
        "6",
        "Subtract 7 from both sides: 3x = 18, then divide by 3: x = 6.",
        (
            Wrong(
                "32/3",
                "Moving 7 to the right gives 3x = 25 + 7 = 32, so x = 32/3.",
                "moving +7 across the equals sign makes it −7, so 3x = 18",
            ),
        ),
    ),
    Question(
        "geometry",
        "What is the sum of the interior angles of a hexagon, in degrees?",
        "720",
        "A polygon with n sides has interior angles summing to (n − 2) · 180°. For n = 6: 4 · 180° = 720°.",
        (
            Wrong(
                "1080",
                "Each of the 6 vertices contributes 180°, so the total is 6 · 180° = 1080°.",
                "the formula is (n − 2) · 180°, not n · 180°",
            ),
            Wrong(
                "540",
                "Using (n − 2) · 180° with n = 5 gives 540°.",
                "a hexagon has 6 sides, not 5",
            ),
        ),
    ),
    Question(
        "probability",
        "A fair die is rolled twice. What is the probability that the sum is 7?",
        "1/6",
        "There are 36 equally likely ordered outcomes and 6 of them sum to 7 "
        "((1,6), (2,5), (3,4), (4,3), (5,2), (6,1)), so the probability is 6/36 = 1/6.",
        (
            Wrong(
                "1/12",
                "The pairs summing to 7 are {1,6}, {2,5} and {3,4}, three out of 36, so 3/36 = 1/12.",
                "the outcomes are ordered, so each pair counts twice: 6/36 = 1/6",
            ),
            Wrong(
                "7/36",
                "Sums range over 2..12 and 7 is the most common; I count 7 combinations, so 7/36.",
                "only 6 ordered outcomes give a sum of 7",
            ),
        ),
    ),
    Question(
        "modular arithmetic",
        "What is the remainder when 2^10 is divided by 7?",
        "2",
        "2^3 = 8 ≡ 1 (mod 7), so 2^10 = (2^3)^3 · 2 ≡ 1 · 2 = 2. Check: 1024 = 7 · 146 + 2.",
        (
            Wrong(
                "4",
                "2^10 = 1024 and 7 · 145 = 1015, so the remainder is 1024 − 1015 = 4... roughly.",
                "7 · 146 = 1022, so the remainder is 1024 − 1022 = 2",
            ),
        ),
    ),
    Question(
        "combinatorics",
        "In how many ways can 5 distinct books be arranged on a shelf?",
        "120",
        "Arrangements of 5 distinct items: 5! = 5 · 4 · 3 · 2 · 1 = 120.",
        (
            Wrong("25", "Each of 5 positions can hold one of 5 books: 5 · 5 = 25.", "books cannot repeat"),
            Wrong(
                "60",
                "5 · 4 · 3 = 60 ways to fill the shelf.",
                "that only fills 3 positions; all 5 books go on the shelf",
            ),
        ),
    ),
    Question(
        "number theory",
        "What is the least common multiple of 12 and 18?",
        "36",
        "12 = 2^2 · 3 and 18 = 2 · 3^2; the LCM takes the highest powers: 2^2 · 3^2 = 36.",
        (
            Wrong(
                "72",
                "The LCM is the product divided by 3: 12 · 18 / 3 = 72.",
                "the product is divided by the GCD, which is 6, giving 36",
            ),
            Wrong("6", "Both numbers are divisible by 6, so the answer is 6.", "6 is the GCD, not the LCM"),
        ),
    ),
    Question(
        "rates",
        "A train travels 180 km in 2.5 hours. What is its average speed in km/h?",
        "72",
        "Average speed = distance / time = 180 / 2.5 = 72 km/h.",
        (
            Wrong("75", "180 / 2.4 ≈ 75 km/h.", "the time is 2.5 hours, not 2.4"),
            Wrong(
                "450", "Speed = 180 · 2.5 = 450 km/h.", "speed is distance divided by time, not multiplied"
            ),
        ),
    ),
    Question(
        "calculus",
        "What is the derivative of x^3 · ln(x)?",
        "3x^2 ln(x) + x^2",
        "Product rule: (x^3)' ln(x) + x^3 (ln x)' = 3x^2 ln(x) + x^3 · (1/x) = 3x^2 ln(x) + x^2.",
        (
            Wrong(
                "3x",
                "Differentiate each factor: 3x^2 · (1/x) = 3x.",
                "the derivative of a product is not the product of derivatives",
            ),
            Wrong(
                "3x^2 ln(x)",
                "Only x^3 depends on x in an interesting way, so the derivative is 3x^2 ln(x).",
                "the x^3 · (1/x) = x^2 term from ln(x) is missing",
            ),
        ),
    ),
    Question(
        "series",
        "What is the sum of the first 50 positive odd numbers?",
        "2500",
        "The sum of the first n odd numbers is n^2, so 50^2 = 2500.",
        (
            Wrong(
                "2550",
                "Pair them up: 50 · 51 = 2550.",
                "50 · 51 is the sum of the first 50 even numbers; for odd numbers it is 50^2",
            ),
        ),
    ),
    Question(
        "radicals",
        "Simplify √50 + √18.",
        "8√2",
        "√50 = 5√2 and √18 = 3√2, so the sum is 8√2.",
        (
            Wrong(
                "√68",
                "Add under the root: √(50 + 18) = √68.",
                "square roots do not add like that: √a + √b ≠ √(a + b)",
            ),
        ),
    ),
    Question(
        "number theory",
        "How many trailing zeros does 100! have?",
        "24",
        "Count factors of 5: ⌊100/5⌋ + ⌊100/25⌋ = 20 + 4 = 24.",
        (
            Wrong(
                "20",
                "Every multiple of 5 gives one zero: 100 / 5 = 20.",
                "multiples of 25 contribute a second factor of 5, adding 4 more",
            ),
        ),
    ),
    Question(
        "percentages",
        "What is 15% of 240?",
        "36",
        "10% of 240 is 24 and 5% is 12, so 15% is 24 + 12 = 36.",
        (
            Wrong("16", "240 / 15 = 16.", "dividing by 15 is not taking 15 percent"),
            Wrong("3.6", "0.15 · 24 = 3.6.", "the base is 240, not 24"),
        ),
    ),
    Question(
        "algebra",
        "Two numbers sum to 30 and differ by 8. What is the larger number?",
        "19",
        "x + y = 30 and x − y = 8; adding gives 2x = 38, so x = 19 (and y = 11).",
        (
            Wrong("11", "Subtracting gives 2y = 22, so the number is 11.", "11 is the smaller number"),
            Wrong("22", "30 − 8 = 22.", "22 and 8 differ by 14, not 8"),
        ),
    ),
    Question(
        "fractions",
        "What is 1/2 + 1/3 + 1/6?",
        "1",
        "Over a common denominator of 6: 3/6 + 2/6 + 1/6 = 6/6 = 1.",
        (
            Wrong(
                "3/11",
                "Add numerators and denominators: (1+1+1)/(2+3+6) = 3/11.",
                "fractions need a common denominator; numerators and denominators do not add",
            ),
        ),
    ),
    Question(
        "geometry",
        "How many edges does a cube have?",
        "12",
        "A cube has 4 edges on top, 4 on the bottom and 4 vertical ones: 12.",
        (
            Wrong("8", "A cube has 8 corners, so 8 edges.", "8 is the number of vertices"),
            Wrong("6", "One edge per face gives 6.", "6 is the number of faces; each face has 4 edges"),
        ),
    ),
    Question(
        "percentages",
        "A shirt costs $40 after a 20% discount. What was the original price?",
        "$50",
        "The sale price is 80% of the original: 0.8 · p = 40, so p = 50.",
        (
            Wrong(
                "$48",
                "Add back 20% of 40: 40 + 8 = 48.",
                "the discount was 20% of the original price, not of the sale price",
            ),
        ),
    ),
    Question(
        "logic",
        "All bloops are razzies and all razzies are lazzies. Are all bloops definitely lazzies?",
        "Yes",
        "The inclusions chain: bloops ⊆ razzies ⊆ lazzies, so every bloop is a lazzie.",
        (
            Wrong(
                "Cannot be determined",
                "We are told nothing directly about bloops and lazzies, so it cannot be determined.",
                "subset inclusion is transitive, so the conclusion follows",
            ),
        ),
    ),
    Question(
        "logic",
        "A bat and a ball cost $1.10 in total. The bat costs $1.00 more than the ball. "
        "How much does the ball cost?",
        "$0.05",
        "Let the ball cost b. Then b + (b + 1.00) = 1.10, so 2b = 0.10 and b = 0.05.",
        (
            Wrong(
                "$0.10",
                "$1.10 − $1.00 = $0.10 for the ball.",
                "then the bat would cost $1.10 and the total $1.20",
            ),
        ),
    ),
    Question(
        "logic",
        "If 5 machines take 5 minutes to make 5 widgets, how long do 100 machines take to make 100 widgets?",
        "5 minutes",
        "Each machine makes one widget in 5 minutes, so 100 machines make 100 widgets in 5 minutes.",
        (
            Wrong(
                "100 minutes",
                "The numbers scale together, so 100 machines, 100 widgets, 100 minutes.",
                "the rate per machine is one widget per 5 minutes regardless of how many machines run",
            ),
        ),
    ),
    Question(
        "logic",
        "A patch of lily pads doubles in size every day and covers the lake on day 48. "
        "On which day was half the lake covered?",
        "47",
        "Doubling means the patch was half the size one day earlier: day 47.",
        (Wrong("24", "Half of 48 days is 24 days.", "growth is exponential, not linear"),),
    ),
    Question(
        "logic",
        "No reptiles are mammals and all snakes are reptiles. Can a snake be a mammal?",
        "No",
        "Every snake is a reptile and no reptile is a mammal, so no snake is a mammal.",
        (
            Wrong(
                "Cannot be determined",
                "Snakes and mammals are not compared directly, so we cannot tell.",
                "the two premises together exclude it",
            ),
        ),
    ),
    Question(
        "logic",
        "Alice is older than Bob and Bob is older than Carol. Is Carol older than Alice?",
        "No",
        "Age order is transitive: Alice > Bob > Carol, so Carol is younger than Alice.",
        (
            Wrong(
                "Cannot be determined",
                "We only know relations involving Bob, so Alice versus Carol is unknown.",
                "'older than' is transitive",
            ),
        ),
    ),
    Question(
        "puzzles",
        "How many times do the hour and minute hands of a clock overlap in 12 hours?",
        "11",
        "The minute hand gains 330° per hour on the hour hand, so overlaps happen every 12/11 hours: "
        "11 times in 12 hours (12:00 is counted once).",
        (
            Wrong(
                "12",
                "They overlap once every hour, so 12 times.",
                "between 11:00 and 1:00 there is only one overlap, at 12:00",
            ),
        ),
    ),
    Question(
        "puzzles",
        "A farmer has 17 sheep and all but 9 run away. How many are left?",
        "9",
        "'All but 9 run away' means 9 stay.",
        (Wrong("8", "17 − 9 = 8 sheep are left.", "'all but 9' means exactly 9 remain"),),
    ),
    Question(
        "chemistry",
        "What is the chemical symbol for sodium?",
        "Na",
        "Sodium's symbol Na comes from its Latin name, natrium.",
        (
            Wrong("So", "The symbol is the first two letters: So.", "So is not an element symbol"),
            Wrong("S", "Sodium starts with S, so S.", "S is sulfur"),
        ),
    ),
    Question(
        "geography",
        "What is the capital of Australia?",
        "Canberra",
        "Canberra was purpose-built as the capital as a compromise between Sydney and Melbourne.",
        (
            Wrong(
                "Sydney",
                "Sydney is the largest and best-known city.",
                "Sydney is the largest city, not the capital",
            ),
            Wrong("Melbourne", "Melbourne hosts Parliament.", "Parliament moved to Canberra in 1927"),
        ),
    ),
    Question(
        "literature",
        "Who wrote 'Pride and Prejudice'?",
        "Jane Austen",
        "'Pride and Prejudice' (1813) is Jane Austen's novel.",
        (
            Wrong(
                "Charlotte Brontë",
                "It is a classic of the Brontë sisters, by Charlotte.",
                "Charlotte Brontë wrote 'Jane Eyre'",
            ),
        ),
    ),
    Question(
        "physics",
        "What is the boiling point of water at sea level in degrees Fahrenheit?",
        "212",
        "Water boils at 100 °C at 1 atm, and 100 · 9/5 + 32 = 212 °F.",
        (
            Wrong("100", "Water boils at 100 degrees.", "100 is the Celsius value"),
            Wrong("180", "100 · 9/5 = 180.", "the +32 offset is missing"),
        ),
    ),
    Question(
        "history",
        "In which year did the Berlin Wall fall?",
        "1989",
        "The border crossings opened on 9 November 1989.",
        (
            Wrong(
                "1991",
                "It fell with the end of the Soviet Union in 1991.",
                "1991 is the Soviet dissolution; the Wall opened in 1989",
            ),
            Wrong(
                "1990", "It fell at reunification in 1990.", "reunification (1990) came after the Wall fell"
            ),
        ),
    ),
    Question(
        "biology",
        "What gas do plants take in from the air for photosynthesis?",
        "Carbon dioxide",
        "Photosynthesis fixes CO2: 6 CO2 + 6 H2O → C6H12O6 + 6 O2.",
        (Wrong("Oxygen", "Plants breathe oxygen.", "oxygen is released by photosynthesis, not taken in"),),
    ),
    Question(
        "geography",
        "What is the largest ocean on Earth?",
        "Pacific",
        "The Pacific covers about 165 million km², more than any other ocean.",
        (
            Wrong(
                "Atlantic",
                "The Atlantic is the largest ocean.",
                "the Atlantic is second, at about half the area",
            ),
        ),
    ),
    Question(
        "biology",
        "How many chromosomes does a typical human body cell have?",
        "46",
        "Humans have 23 pairs of chromosomes, 46 in total.",
        (
            Wrong("23", "Humans have 23 chromosomes.", "23 is the number of pairs"),
            Wrong("48", "Like other great apes, 48.", "other great apes have 48; humans have 46"),
        ),
    ),
    Question(
        "physics",
        "Approximately what is the speed of light in vacuum, in km/s?",
        "300,000",
        "c = 299,792.458 km/s, about 300,000 km/s.",
        (
            Wrong(
                "186,000",
                "The speed of light is about 186,000.",
                "186,000 is in miles per second",
            ),
        ),
    ),
    Question(
        "chemistry",
        "Which element has atomic number 6?",
        "Carbon",
        "Carbon has 6 protons.",
        (
            Wrong("Nitrogen", "Nitrogen is element 6.", "nitrogen is 7"),
            Wrong("Oxygen", "Oxygen has 6 electrons in its outer shell, so it is 6.", "oxygen is element 8"),
        ),
    ),
)
